"""The demo chat page at ``/``: a small chat on the v2 endpoints, no build step.

The page itself (``templates/demo/chat.html`` at the top of the repository) talks to
``/api/copilotkit`` with ``fetch`` and a streaming reader, as any AG-UI client would; the view
only hands it the URLs it needs and a CSRF token, so a visitor logged in to the admin chats
under their own account.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import ensure_csrf_cookie

from agents.registry import DEFAULT_AGENT_NAME
from copilot_runtime.adapters import runtime_adapter_spec
from copilot_runtime.http.cors import RUNTIME_PATH_PREFIX


@ensure_csrf_cookie
def demo_chat(request: HttpRequest) -> HttpResponse:
    model_configured = runtime_adapter_spec()["kind"] != "demo"
    return render(
        request,
        "demo/chat.html",
        {
            "runtime_url": request.META.get("SCRIPT_NAME", "").rstrip("/") + RUNTIME_PATH_PREFIX,
            "agent_id": DEFAULT_AGENT_NAME,
            # Resolves the client's thread id to that thread's inspector.
            "admin_open_url": reverse("admin:conversations_thread_open"),
            "offline_model": not model_configured,
        },
    )
