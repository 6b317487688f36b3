"""ASGI entry point: Django handles HTTP (so a client abort cancels the view); the websocket
scope is GraphQL over websockets (``copilot_runtime.ws``)."""

import os

from channels.routing import ProtocolTypeRouter
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "copilot_runtime.settings")

django_asgi_app = get_asgi_application()

# Imported after Django is set up: the websocket application imports models.
from copilot_runtime.ws.routing import websocket_application  # noqa: E402

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket_application()})
