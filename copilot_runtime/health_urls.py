"""The health checks, for a load balancer: include them where the project wants them::

    path("", include("copilot_runtime.health_urls")),

serves ``/healthz`` (the process answers) and ``/readyz`` (it can serve now: the database,
the channel layer and the broker it uses; copilot_runtime/endpoints/health.py).
"""

from django.urls import path

from copilot_runtime.endpoints import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
]
