"""The runtime's ASGI entry for a project: one call in the project's ``asgi.py``::

    import os

    from django.core.asgi import get_asgi_application

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
    django_asgi_app = get_asgi_application()

    from copilot_runtime.routing import runtime_application  # after Django is set up

    application = runtime_application(django_asgi_app)

``runtime_application`` returns a Channels ``ProtocolTypeRouter``: HTTP through the runtime's
front (its two hot endpoints served without Django's handler, every other request to
``django_asgi_app``: ``copilot_runtime/endpoints/front.py``), websockets to the runtime's GraphQL
route (and, given ``websocket=``, every other websocket path to the project's own websocket
application), and the lifespan (composed with the project's own, given ``lifespan=``). The
standalone site serves exactly this.

``websocket_urlpatterns`` and ``lifespan`` stay here for projects that build their own router.
"""

from __future__ import annotations

import re
from typing import Any

from channels.routing import ProtocolTypeRouter

from copilot_runtime.endpoints.front import RuntimeFront
from copilot_runtime.lifespan import ASGIApp, lifespan, lifespan_with
from copilot_runtime.ws.routing import WEBSOCKET_PATH, websocket_application, websocket_urlpatterns

__all__ = ["lifespan", "runtime_application", "websocket_urlpatterns"]


def runtime_application(
    django_asgi_app: ASGIApp,
    *,
    websocket: ASGIApp | None = None,
    lifespan: ASGIApp | None = None,
) -> ProtocolTypeRouter:
    """The application a project serves (uvicorn, daphne, any ASGI server).

    ``websocket``: the project's own websocket application (say ``AuthMiddlewareStack(
    URLRouter(its_routes))``), for every path but the runtime's. ``lifespan``: the project's
    own lifespan application, started before the runtime's and stopped after it."""
    return ProtocolTypeRouter(
        {
            "http": RuntimeFront(django_asgi_app),
            "websocket": _websockets(websocket),
            "lifespan": _runtime_lifespan if lifespan is None else lifespan_with(lifespan),
        }
    )


_runtime_lifespan = lifespan
_OURS = re.compile(WEBSOCKET_PATH)


def _websockets(host: ASGIApp | None) -> ASGIApp:
    ours = websocket_application()
    if host is None:
        return ours

    async def either(scope: dict[str, Any], receive: Any, send: Any) -> None:
        # Channels' URLRouter matches paths without their leading slash.
        if _OURS.match(scope["path"].lstrip("/")):
            await ours(scope, receive, send)
        else:
            await host(scope, receive, send)

    return either
