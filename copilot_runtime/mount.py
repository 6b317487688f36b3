"""Where the runtime is mounted: the one place that names its URL.

A host project includes ``copilot_runtime.urls`` at this path (``RUNTIME_ROUTE`` for
``path()``); the ASGI front, CORS, the websocket route and the demo page all derive from it.
``COPILOT_RUNTIME["PATH"]`` moves it (the host then includes the URLs at the same place).
"""

from __future__ import annotations

from copilot_runtime.conf import runtime_setting

# Read once: URL patterns and the ASGI front are built at import.
RUNTIME_PATH = "/" + str(runtime_setting("PATH")).strip("/")
RUNTIME_ROUTE = RUNTIME_PATH.lstrip("/")
