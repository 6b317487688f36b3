"""The standalone site: settings, URLs, the ASGI and Celery apps and the demo page.

A host project uses none of this: it includes ``copilot_runtime.urls`` and wraps its own ASGI
application with ``copilot_runtime.routing``.
"""
