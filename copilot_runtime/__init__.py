"""The self-hosted CopilotKit runtime for Django.

Importing the app configures nothing: the standalone site's settings load its Celery app
(``copilot_runtime.site.celery``) when runs go to Celery; a host project's own Celery app finds the
runtime's tasks (``shared_task`` in ``copilot_runtime.tasks``) with ``autodiscover_tasks()``.
"""
