"""``Recent``: what was made of a history message, given back for the same message only."""

from __future__ import annotations

from typing import Any

from copilot_runtime.events.recent import Recent


class Maker:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, raw: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        return {"made": raw["text"].upper()}


def test_an_equal_message_under_the_same_id_gets_what_was_made_before() -> None:
    recent: Recent[dict[str, Any]] = Recent()
    make = Maker()

    first = recent.made_from("m-1", {"id": "m-1", "text": "hi"}, make)
    again = recent.made_from("m-1", {"id": "m-1", "text": "hi"}, make)  # a new, equal dict

    assert again is first
    assert make.calls == 1


def test_changed_content_under_a_known_id_is_made_again() -> None:
    recent: Recent[dict[str, Any]] = Recent()
    make = Maker()
    recent.made_from("m-1", {"id": "m-1", "text": "hi"}, make)

    changed = recent.made_from("m-1", {"id": "m-1", "text": "bye"}, make)

    assert changed == {"made": "BYE"}
    assert make.calls == 2
    assert recent.made_from("m-1", {"id": "m-1", "text": "bye"}, make) is changed


def test_a_message_without_an_id_is_never_remembered() -> None:
    recent: Recent[dict[str, Any]] = Recent()
    make = Maker()
    for key in (None, "", 7):
        recent.made_from(key, {"text": "x"}, make)
        recent.made_from(key, {"text": "x"}, make)

    assert make.calls == 6
    assert len(recent) == 0


def test_the_least_recently_used_message_goes_first() -> None:
    recent: Recent[dict[str, Any]] = Recent(size=2)
    make = Maker()
    recent.made_from("a", {"text": "a"}, make)
    recent.made_from("b", {"text": "b"}, make)
    recent.made_from("a", {"text": "a"}, make)  # used again: "b" is now the oldest
    recent.made_from("c", {"text": "c"}, make)

    assert len(recent) == 2
    assert recent.recall("a", {"text": "a"})[0] is True
    assert recent.recall("b", {"text": "b"})[0] is False
    assert recent.recall("c", {"text": "c"})[0] is True
