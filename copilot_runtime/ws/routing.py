"""The websocket application served at ``/api/copilotkit`` (mounted by ``copilot_runtime.asgi``)."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.urls import re_path

from copilot_runtime.graphql.schema import schema
from copilot_runtime.ws.consumer import RuntimeGraphQLWSConsumer
from copilot_runtime.ws.origins import RuntimeOriginValidator

WEBSOCKET_PATH = r"^api/copilotkit/?$"


def websocket_application() -> Any:
    """Origin check, then the Django session, then the GraphQL consumer."""
    return RuntimeOriginValidator(
        AuthMiddlewareStack(
            URLRouter([re_path(WEBSOCKET_PATH, RuntimeGraphQLWSConsumer.as_asgi(schema=schema))])
        )
    )
