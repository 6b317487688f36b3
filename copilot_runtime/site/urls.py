"""The standalone site's URLconf: the demo page, the admin, the health checks and the runtime
at its mount point. A host project includes ``copilot_runtime.urls`` and, for its load
balancer, ``copilot_runtime.health_urls``."""

from django.contrib import admin
from django.urls import include, path

from copilot_runtime.mount import RUNTIME_ROUTE
from copilot_runtime.site import demo

urlpatterns = [
    path("", demo.demo_chat, name="demo-chat"),
    path("", include("copilot_runtime.health_urls")),
    path("admin/", admin.site.urls),
    path(RUNTIME_ROUTE, include("copilot_runtime.urls")),
]
