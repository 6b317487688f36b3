"""``KnownHistory``'s forms: what a pass made of a history's messages, given back to the next
history only for the messages it shares with it (copilot_runtime/history/known.py)."""

from __future__ import annotations

from typing import Any

from copilot_runtime.history import HistoryCache, KnownHistory


def _raws(count: int) -> list[dict[str, Any]]:
    return [{"id": f"m{i}"} for i in range(count)]


def _next(cache: HistoryCache, raws: list[Any]) -> KnownHistory:
    """The history of the thread's next request, carrying ``raws``."""
    return cache.enter("r", raws, thread=(None, "t"))


def test_a_pass_over_other_lists_resumes_after_the_same_objects() -> None:
    converted = [object(), object()]  # what a layer made of the messages (their rows, say)
    known = KnownHistory("r", _raws(2))
    known.keep("pass", converted, "after two")

    assert known.resume("pass", [*converted, object()]) == (2, "after two")
    assert known.resume("pass", [converted[0]]) == (0, None)  # shorter than what was kept
    assert known.resume("pass", [object(), converted[1]]) == (0, None)
    assert known.resume("another pass", converted) == (0, None)


def test_what_a_pass_keeps_is_its_own_list() -> None:
    converted = [object(), object()]
    known = KnownHistory("r", _raws(2))
    known.keep("pass", converted, "state")
    converted.append(object())  # the caller's list changes afterwards

    assert known.resume("pass", converted) == (2, "state")


def test_a_pass_over_the_history_s_messages_resumes_in_the_next_history() -> None:
    cache = HistoryCache()
    first = _next(cache, _raws(2))
    first.keep("pass", first.raws, "after two")
    assert first.resume("pass", list(first.raws)) == (0, None)  # not its messages

    second = _next(cache, [*first.raws, {"id": "m2"}])
    assert second.resume("pass", second.raws) == (2, "after two")
    shorter = _next(cache, first.raws[:1])  # a regenerated reply: state past its end
    assert shorter.resume("pass", shorter.raws) == (0, None)


def test_what_was_made_of_each_message_is_given_for_the_messages_shared() -> None:
    cache = HistoryCache()
    first = _next(cache, _raws(4))
    first.keep_each("each", first.raws, ["a", "b", "c", "d"])
    assert first.reuse("each", first.raws) == (0, 4, ["a", "b", "c", "d"])
    assert first.reuse("each", list(first.raws)) == (0, 0, [])  # not its messages
    assert first.reuse("other", first.raws) == (0, 0, [])
    assert first.resume("each", first.raws) == (0, None)  # per message: not a whole pass

    longer = _next(cache, [*first.raws, {"id": "m4"}])
    assert longer.reuse("each", longer.raws) == (0, 4, ["a", "b", "c", "d"])
    shorter = _next(cache, longer.raws[:2])  # a regenerated reply
    assert shorter.reuse("each", shorter.raws) == (0, 2, ["a", "b"])
    changed = _next(cache, [shorter.raws[0], {"id": "m1", "text": "edited"}, *first.raws[2:]])
    assert changed.reuse("each", changed.raws) == (0, 1, ["a"])  # up to the changed message


def test_behind_a_first_message_of_the_request_s_own_the_rest_is_given() -> None:
    # v1's instructions come first, under a fresh id in every request.
    cache = HistoryCache()
    first = _next(cache, [{"id": "sys-1"}, *_raws(3)])
    first.keep_each("each", first.raws, ["s", "a", "b", "c"])

    second = _next(cache, [{"id": "sys-2"}, *first.raws[1:], {"id": "m3"}])

    assert second.reuse("each", second.raws) == (1, 4, ["a", "b", "c"])


def test_made_of_each_is_kept_up_to_the_first_message_without_an_id() -> None:
    # The store gives such a message an id of its own when it writes it: never shared.
    known = KnownHistory("r", [*_raws(2), {"id": ""}, {"id": "m3"}])
    known.keep_each("each", known.raws, ["a", "b", "c", "d"])
    assert known.reuse("each", known.raws) == (0, 2, ["a", "b"])

    anonymous_first = KnownHistory("r", [{"text": "no id"}, *_raws(2)])
    anonymous_first.keep_each("first", anonymous_first.raws, ["x", "y", "z"])
    assert anonymous_first.reuse("first", anonymous_first.raws) == (0, 0, [])


def test_only_messages_of_strings_are_known_by_equality() -> None:
    raws = [
        {"id": "a", "content": [{"type": "text", "text": "x"}], "name": None},
        {"id": "b", "toolCalls": [{"function": {"arguments": '{"n": 1}'}}]},
        {"id": "c", "running": True},
        {"id": "d"},
    ]
    known = KnownHistory("r", raws)

    assert known.plain_end() == 2
    # Equal messages are known up to the first one that is not plain; the same objects beyond.
    assert known.common_prefix([dict(raw) for raw in raws], 0) == 2
    assert known.common_prefix([dict(raws[0]), *raws[1:]], 0) == 4
    assert known.common_prefix(list(raws), 0) == 4
    assert known.common_prefix([dict(raws[0]), {"id": "b"}, *raws[2:]], 0) == 1
