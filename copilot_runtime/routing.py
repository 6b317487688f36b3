"""The runtime's websocket routes, for a host project's ASGI application::

from channels.routing import ProtocolTypeRouter, URLRouter
from django.core.asgi import get_asgi_application

django_asgi_app = get_asgi_application()
from copilot_runtime.routing import websocket_urlpatterns  # after Django is set up

application = ProtocolTypeRouter(
    {"http": django_asgi_app, "websocket": URLRouter(websocket_urlpatterns)}
)

``lifespan`` (optional: ``"lifespan": lifespan``) closes the runtime's database pools when the
server shuts down.
"""

from copilot_runtime.lifespan import lifespan
from copilot_runtime.ws.routing import websocket_urlpatterns

__all__ = ["lifespan", "websocket_urlpatterns"]
