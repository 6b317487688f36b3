"""The Celery app: the official Django pattern, configured from ``CELERY_*`` settings."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "copilot_runtime.site.settings")

app = Celery("copilot_runtime")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
