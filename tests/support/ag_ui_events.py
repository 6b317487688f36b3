"""Every AG-UI event the runtime emits must be one the protocol's own models accept."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ag_ui.core import Event
from pydantic import TypeAdapter

AG_UI_EVENT: TypeAdapter[Any] = TypeAdapter(Event)


def assert_ag_ui_events(events: Iterable[dict[str, Any]]) -> None:
    """Validates each event against the ``ag-ui-protocol`` package's event models (the
    discriminated union on ``type``); a wrong field type or a missing field fails."""
    for event in events:
        AG_UI_EVENT.validate_python(event)
