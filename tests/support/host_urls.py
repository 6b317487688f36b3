"""A host project's URLconf that mounts only the runtime, as the README says."""

from django.urls import include, path

urlpatterns = [path("api/copilotkit", include("copilot_runtime.urls"))]
