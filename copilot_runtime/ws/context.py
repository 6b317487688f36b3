"""The context of a websocket connection: a ``RuntimeContext`` strawberry can hand
``connection_init``'s payload to (it sets ``connection_params`` when the attribute exists)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from copilot_runtime.graphql.context import RuntimeContext


@dataclass
class SocketContext(RuntimeContext):
    # connection_init's payload, once received.
    connection_params: dict[str, Any] | None = None
