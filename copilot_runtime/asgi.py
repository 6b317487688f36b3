"""ASGI entry point: the two hot endpoints in front of Django (``http/front.py``), Django for
every other HTTP request, GraphQL over websockets (``copilot_runtime.ws``), and the lifespan
(its shutdown closes the turn store's pools)."""

import os

from channels.routing import ProtocolTypeRouter
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "copilot_runtime.settings")

django_asgi_app = get_asgi_application()

# Imported after Django is set up: the websocket application imports models.
from copilot_runtime.http.front import RuntimeFront  # noqa: E402
from copilot_runtime.lifespan import lifespan  # noqa: E402
from copilot_runtime.ws.routing import websocket_application  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": RuntimeFront(django_asgi_app),
        "websocket": websocket_application(),
        "lifespan": lifespan,
    }
)
