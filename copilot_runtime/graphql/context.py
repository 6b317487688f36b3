"""The object every resolver gets as ``info.context``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest


@dataclass
class RuntimeContext:
    """Who is asking and how: the request (if any), the resolved user, lower-cased headers.

    ``extra`` is free-form room for the transport (websocket scope, abort signals, ...).
    """

    request: HttpRequest | None
    user: Any
    headers: Mapping[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
