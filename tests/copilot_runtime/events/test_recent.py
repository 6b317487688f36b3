"""``Recent``: what was made of a history message, given back for the same message only, with
one bound for every ``Recent`` of a store."""

from __future__ import annotations

from typing import Any

from copilot_runtime.events.recent import MESSAGES, Recent, RecentStore


class Maker:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, raw: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        return {"made": raw["text"].upper()}


def test_an_equal_message_under_the_same_id_gets_what_was_made_before() -> None:
    recent: Recent[dict[str, Any]] = Recent(RecentStore())
    make = Maker()

    first = recent.made_from("m-1", {"id": "m-1", "text": "hi"}, make)
    again = recent.made_from("m-1", {"id": "m-1", "text": "hi"}, make)  # a new, equal dict

    assert again is first
    assert make.calls == 1


def test_changed_content_under_a_known_id_is_made_again() -> None:
    recent: Recent[dict[str, Any]] = Recent(RecentStore())
    make = Maker()
    recent.made_from("m-1", {"id": "m-1", "text": "hi"}, make)

    changed = recent.made_from("m-1", {"id": "m-1", "text": "bye"}, make)

    assert changed == {"made": "BYE"}
    assert make.calls == 2
    assert recent.made_from("m-1", {"id": "m-1", "text": "bye"}, make) is changed


def test_a_message_without_an_id_is_never_remembered() -> None:
    store = RecentStore()
    recent: Recent[dict[str, Any]] = Recent(store)
    make = Maker()
    for key in (None, "", 7):
        recent.made_from(key, {"text": "x"}, make)
        recent.made_from(key, {"text": "x"}, make)

    assert make.calls == 6
    assert len(store) == 0


def test_the_least_recently_used_message_goes_first() -> None:
    store = RecentStore(size=2)
    recent: Recent[dict[str, Any]] = Recent(store)
    make = Maker()
    recent.made_from("a", {"text": "a"}, make)
    recent.made_from("b", {"text": "b"}, make)
    recent.made_from("a", {"text": "a"}, make)  # used again: "b" is now the oldest
    recent.made_from("c", {"text": "c"}, make)

    assert len(store) == 2
    assert recent.recall("a", {"text": "a"})[0] is True
    assert recent.recall("b", {"text": "b"})[0] is False
    assert recent.recall("c", {"text": "c"})[0] is True


def test_the_bound_is_the_store_s_whichever_recent_remembers() -> None:
    """One process serving both protocols remembers as many messages as one serving either:
    the messages of one kind make room for the other's, oldest first."""
    store = RecentStore(size=3)
    v1: Recent[dict[str, Any]] = Recent(store)
    v2: Recent[dict[str, Any]] = Recent(store)
    make = Maker()
    for key in ("a", "b", "c"):
        v1.made_from(key, {"text": key}, make)
    v2.made_from("d", {"text": "d"}, make)
    v2.made_from("e", {"text": "e"}, make)

    assert len(store) == 3
    assert [v1.recall(key, {"text": key})[0] for key in ("a", "b", "c")] == [False, False, True]
    assert v2.recall("d", {"text": "d"})[0] is True
    assert v2.recall("e", {"text": "e"})[0] is True


def test_what_one_recent_made_is_never_given_to_another() -> None:
    store = RecentStore()
    checked: Recent[dict[str, Any]] = Recent(store)
    converted: Recent[dict[str, Any]] = Recent(store)
    make = Maker()
    checked.made_from("m-1", {"text": "hi"}, make)

    assert converted.recall("m-1", {"text": "hi"}) == (False, None)
    converted.made_from("m-1", {"text": "hi"}, make)  # the id's entry is now the other's
    assert make.calls == 2
    assert checked.recall("m-1", {"text": "hi"}) == (False, None)


def test_the_runtime_s_recents_share_the_process_store() -> None:
    from copilot_runtime.agui import run_input
    from copilot_runtime.graphql import turn_input

    assert run_input._CHECKED_MESSAGES.store is MESSAGES
    assert turn_input._PARSED_MESSAGES.store is MESSAGES


class _Counted(dict[str, Any]):
    """A message that counts how often it is compared."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        _Counted.comparisons += 1
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        _Counted.comparisons += 1
        return super().__ne__(other)


def test_a_message_looked_up_twice_in_one_request_is_compared_once() -> None:
    # v1 asks whether a history message was parsed before (its check), then parses it: the
    # second look-up of the same message must not compare it all over again.
    recent: Recent[dict[str, Any]] = Recent(RecentStore())
    make = Maker()
    recent.made_from("m-1", _Counted(id="m-1", text="hi"), make)  # an earlier request
    _Counted.comparisons = 0

    raw = _Counted(id="m-1", text="hi")  # this request's equal message
    assert recent.recall("m-1", raw)[0]
    assert recent.made_from("m-1", raw, make) == {"made": "HI"}

    assert _Counted.comparisons == 1
    assert make.calls == 1
