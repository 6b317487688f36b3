# The README's asgi.py for a host project (copied over the startproject one by
# tests/e2e/test_host_project.py).
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostsite.settings")
django_asgi_app = get_asgi_application()

from copilot_runtime.routing import runtime_application  # noqa: E402

application = runtime_application(django_asgi_app)
