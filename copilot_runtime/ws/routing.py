"""The websocket route of the runtime, at its mount point (``copilot_runtime.mount``).

``websocket_urlpatterns`` is what a host project adds to its ``ProtocolTypeRouter``
(``copilot_runtime.routing`` re-exports it, the Channels convention); the route carries its
own origin check and session authentication, so it works inside or outside the host's
middleware. ``websocket_application()`` is the standalone site's whole websocket side.
"""

from __future__ import annotations

import re
from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.urls import re_path

from copilot_runtime.graphql.schema import schema
from copilot_runtime.mount import RUNTIME_ROUTE
from copilot_runtime.ws.consumer import RuntimeGraphQLWSConsumer
from copilot_runtime.ws.limits import SocketLimiter
from copilot_runtime.ws.origins import RuntimeOriginValidator

WEBSOCKET_PATH = rf"^{re.escape(RUNTIME_ROUTE)}/?$"

websocket_urlpatterns = [
    re_path(
        WEBSOCKET_PATH,
        # Origin check, the per-process socket bounds (before the session costs a database
        # read), the Django session, then the GraphQL consumer.
        RuntimeOriginValidator(
            SocketLimiter(AuthMiddlewareStack(RuntimeGraphQLWSConsumer.as_asgi(schema=schema)))
        ),
    )
]


def websocket_application() -> Any:
    return URLRouter(websocket_urlpatterns)
