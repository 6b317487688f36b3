"""The AG-UI 1.0 JSON Schema (``agui/ag-ui-1.0.schema.json``, see its ``$comment`` and
``agui/README.md``) as a validator: every event a 1.0 client's run receives is checked with it."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema_rs

SCHEMA_1_0: Path = Path(__file__).resolve().parent / "agui" / "ag-ui-1.0.schema.json"


@functools.cache
def _validators() -> tuple[Any, Any]:
    schema = json.loads(SCHEMA_1_0.read_text())
    event = jsonschema_rs.Draft202012Validator(schema)
    run_input = jsonschema_rs.Draft202012Validator({**schema, "$ref": "#/$defs/RunAgentInput"})
    return event, run_input


def agui10_event_errors(event: Any) -> list[str]:
    """What makes ``event`` invalid as an AG-UI 1.0 event (empty when it is valid)."""
    return [error.message for error in _validators()[0].iter_errors(event)]


def agui10_input_errors(run_input: Any) -> list[str]:
    return [error.message for error in _validators()[1].iter_errors(run_input)]


def assert_agui10_events(events: list[dict[str, Any]]) -> None:
    invalid = {
        index: errors
        for index, event in enumerate(events)
        if (errors := agui10_event_errors(event))
    }
    assert not invalid, "events invalid against AG-UI 1.0:\n" + "\n".join(
        f"{json.dumps(events[index])}: {errors}" for index, errors in invalid.items()
    )
