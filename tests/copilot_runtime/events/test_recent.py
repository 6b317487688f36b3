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


# --- whole histories -------------------------------------------------------------------------


def _history(count: int, *, text: str = "m") -> list[dict[str, Any]]:
    return [{"id": f"h-{i}", "text": f"{text}{i}"} for i in range(count)]


def _has_id(raw: Any) -> bool:
    return isinstance(raw, dict) and bool(raw.get("id"))


def _keep(recent: Recent[dict[str, Any]], raws: list[Any], *, known: int = 0) -> list[Any]:
    made = [{"made": raw["text"]} for raw in raws]
    recent.keep_history(raws, made, known=known, rememberable=_has_id)
    return made


def test_a_history_sent_again_and_extended_is_recognised_up_to_what_was_kept() -> None:
    recent: Recent[dict[str, Any]] = Recent(RecentStore())
    made = _keep(recent, _history(3))

    longer = _history(5)  # new, equal dicts for the first three, two new messages after them
    known, remembered = recent.history_prefix(longer)

    assert known == 3
    assert remembered == made and all(a is b for a, b in zip(remembered, made, strict=True))


def test_a_history_with_a_changed_message_is_not_recognised() -> None:
    """Recognised only whole: a changed message anywhere in what was kept (an edit keeps its
    id) sends every message back to being looked up on its own."""
    recent: Recent[dict[str, Any]] = Recent(RecentStore())
    _keep(recent, _history(4))

    for index in (0, 2, 3):
        edited = _history(4)
        edited[index]["text"] = "edited"
        assert recent.history_prefix(edited) == (0, [])
    assert recent.history_prefix(_history(2)) == (0, [])  # shorter: messages were removed
    assert recent.history_prefix([]) == (0, [])
    assert recent.history_prefix(["not a message"]) == (0, [])


def test_a_kept_history_stops_before_its_first_message_without_an_id() -> None:
    recent: Recent[dict[str, Any]] = Recent(RecentStore())
    raws = [*_history(2), {"text": "no id"}, {"id": "h-3", "text": "m3"}]
    _keep(recent, raws)

    assert recent.history_prefix([*_history(2), {"text": "no id"}])[0] == 2
    _keep(recent, [{"text": "no id"}, *_history(2)])  # nothing to key it by: not kept
    assert recent.history_prefix([{"text": "no id"}, *_history(2)]) == (0, [])


def test_the_second_look_up_of_a_history_in_one_request_compares_nothing() -> None:
    # v1's check recognises the history, then its parse does: the second must not compare the
    # messages all over again.
    recent: Recent[dict[str, Any]] = Recent(RecentStore())
    _keep(recent, [_Counted(id=f"h-{i}", text=f"m{i}") for i in range(3)])
    raws = [_Counted(id=f"h-{i}", text=f"m{i}") for i in range(3)]
    _Counted.comparisons = 0

    assert recent.history_prefix(raws)[0] == 3
    compared_once = _Counted.comparisons
    assert recent.history_prefix(raws)[0] == 3

    assert compared_once == 3
    assert _Counted.comparisons == compared_once


def test_keeping_a_recognised_history_asks_only_about_the_messages_after_it() -> None:
    recent: Recent[dict[str, Any]] = Recent(RecentStore())
    _keep(recent, _history(3))
    longer = _history(5)
    known, remembered = recent.history_prefix(longer)
    asked: list[Any] = []

    def rememberable(raw: Any) -> bool:
        asked.append(raw)
        return True

    made = [*remembered, {"made": "m3"}, {"made": "m4"}]
    recent.keep_history(longer, made, known=known, rememberable=rememberable)

    assert asked == longer[3:]
    assert recent.history_prefix(_history(6)) == (5, made)


def test_histories_share_the_store_s_bound_counted_in_messages() -> None:
    store = RecentStore(size=5)
    recent: Recent[dict[str, Any]] = Recent(store)
    _keep(recent, [{"id": "a-0", "text": "a"}, {"id": "a-1", "text": "b"}])
    _keep(recent, [{"id": "b-0", "text": "c"}, {"id": "b-1", "text": "d"}])
    _keep(recent, [{"id": "c-0", "text": "e"}, {"id": "c-1", "text": "f"}])  # 6 > 5: "a" out

    assert store.history_messages == 4
    assert recent.history_prefix([{"id": "a-0", "text": "a"}, {"id": "a-1", "text": "b"}])[0] == 0
    assert recent.history_prefix([{"id": "b-0", "text": "c"}, {"id": "b-1", "text": "d"}])[0] == 2

    _keep(recent, _history(6))  # longer than the whole bound: never kept
    assert recent.history_prefix(_history(6)) == (0, [])
    _keep(recent, [{"id": "b-0", "text": "c"}])  # the same first message: replaces its entry
    assert store.history_messages == 3

    store.resize(0)
    assert store.history_messages == 0 and not store.histories


def test_what_one_recent_kept_of_a_history_is_never_given_to_another() -> None:
    store = RecentStore()
    checked: Recent[dict[str, Any]] = Recent(store)
    converted: Recent[dict[str, Any]] = Recent(store)
    _keep(checked, _history(2))

    assert converted.history_prefix(_history(2)) == (0, [])
    assert checked.history_prefix(_history(2))[0] == 2


def test_a_pass_resumes_after_the_same_message_objects() -> None:
    from copilot_runtime.events.recent import PrefixMemo

    memo: PrefixMemo[str] = PrefixMemo(RecentStore(size=10))
    history = [{"id": "m1"}, {"id": "m2"}]
    memo.keep(history, "after two")

    assert memo.resume([*history, {"id": "m3"}]) == (2, "after two")
    assert memo.resume([history[0]]) == (0, None)  # shorter than what was kept
    assert memo.resume([dict(history[0]), history[1]]) == (0, None)  # equal, not the same
    assert memo.resume([{"id": "m9"}, *history]) == (0, None)


def test_what_a_prefix_memo_keeps_is_bounded_in_messages() -> None:
    from copilot_runtime.events.recent import PrefixMemo

    memo: PrefixMemo[int] = PrefixMemo(RecentStore(size=5))
    threads = [[{"id": f"t{t}-{n}"} for n in range(2)] for t in range(3)]
    for state, history in enumerate(threads):
        memo.keep(history, state)

    assert memo.resume(threads[0]) == (0, None)  # the oldest gave way
    assert memo.resume(threads[2]) == (2, 2)
    memo.keep([{"id": f"x{n}"} for n in range(6)], 9)  # more than the bound: not kept
    assert memo.resume(threads[2]) == (2, 2)
