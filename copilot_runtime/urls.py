from django.contrib import admin
from django.urls import path, re_path

from copilot_runtime.agui import demo
from copilot_runtime.http import endpoint, health

urlpatterns = [
    path("", demo.demo_chat, name="demo-chat"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    re_path(r"^api/copilotkit/?$", endpoint.copilotkit_endpoint, name="copilotkit"),
    re_path(
        r"^api/copilotkit/(?P<subpath>.+)$", endpoint.copilotkit_subpath, name="copilotkit-subpath"
    ),
]
