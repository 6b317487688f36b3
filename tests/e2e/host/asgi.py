# The README's asgi.py for a host project (copied over the startproject one by
# tests/e2e/test_host_project.py).
import os

from channels.routing import ProtocolTypeRouter, URLRouter
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostsite.settings")
django_asgi_app = get_asgi_application()
# After get_asgi_application(): the routes import models (the Channels convention).
from copilot_runtime.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {"http": django_asgi_app, "websocket": URLRouter(websocket_urlpatterns)}
)
