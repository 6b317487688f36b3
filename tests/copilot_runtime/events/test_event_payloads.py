"""Events rebuilt from the run's log read past fields a newer release added (its workers are
upgraded first), and still refuse a payload that lacks what they need."""

from __future__ import annotations

import pytest

from copilot_runtime.events import GenerationEnd, TextDelta, event_from_payload


def test_a_field_from_a_newer_release_is_left_out() -> None:
    payload = {
        **GenerationEnd(model="m", input_tokens=3).to_payload(),
        "a_later_field": 7,
    }
    event = event_from_payload(GenerationEnd.type, payload)
    assert event == GenerationEnd(model="m", input_tokens=3)


def test_a_payload_missing_a_required_field_is_still_refused() -> None:
    with pytest.raises(TypeError):
        event_from_payload(TextDelta.type, {"delta": "hi"})
    with pytest.raises(TypeError):
        event_from_payload(TextDelta.type, {"delta": "hi", "future": 1})
