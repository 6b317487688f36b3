# A host project's asgi.py on the runtime's ASGI entry, with websocket routes and a lifespan
# of its own (copied over the startproject one by tests/e2e/test_host_entry.py).
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostsite.settings")
django_asgi_app = get_asgi_application()

from channels.routing import URLRouter  # noqa: E402
from django.urls import path  # noqa: E402
from hostsite.probe import EchoConsumer, host_lifespan  # noqa: E402

from copilot_runtime.routing import runtime_application  # noqa: E402

application = runtime_application(
    django_asgi_app,
    websocket=URLRouter([path("ws/echo/", EchoConsumer.as_asgi())]),
    lifespan=host_lifespan,
)
