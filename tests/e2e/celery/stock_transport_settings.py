"""The standalone site's settings with kombu's own Redis transport: ``DJANGO_SETTINGS_MODULE``
for the served processes of a test that must not take the runtime's transport subclass
(copilot_runtime/site/settings.py names it for any single ``redis://`` broker)."""

from __future__ import annotations

from copilot_runtime.site import settings as _site

# Without CELERY_BROKER_TRANSPORT, Celery takes the transport from the broker URL: kombu's redis.
globals().update(
    {
        name: value
        for name, value in vars(_site).items()
        if name.isupper() and name != "CELERY_BROKER_TRANSPORT"
    }
)
