"""The standalone site's ASGI entry: the runtime's own host entry
(``copilot_runtime.routing.runtime_application``) around Django, as any project serves it."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "copilot_runtime.site.settings")

django_asgi_app = get_asgi_application()

# Imported after Django is set up: the websocket application imports models.
from copilot_runtime.routing import runtime_application  # noqa: E402

application = runtime_application(django_asgi_app)
