"""The runtime's URLs, to include at its mount point (``copilot_runtime.mount``):

    path("api/copilotkit", include("copilot_runtime.urls"))

serves both protocols at ``/api/copilotkit`` and every sub-route (``/info``, ``/agent/...``,
``/threads...``). The standalone site's own URLconf is ``copilot_runtime.site.urls``.
"""

from django.urls import re_path

from copilot_runtime.endpoints import runtime as endpoint

app_name = "copilot_runtime"

# The mount point has no trailing slash (clients POST to ``/api/copilotkit``), so what follows
# it may start with one; ``(?:/)?`` rather than ``/?`` keeps Django's leading-slash check quiet.
urlpatterns = [
    re_path(r"^(?:/)?$", endpoint.copilotkit_endpoint, name="copilotkit"),
    re_path(r"^(?:/)?(?P<subpath>.+)$", endpoint.copilotkit_subpath, name="copilotkit-subpath"),
]
