"""The self-hosted CopilotKit runtime for Django: project configuration and runtime engine."""

from copilot_runtime.celery import app as celery_app

__all__ = ["celery_app"]
