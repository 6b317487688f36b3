"""``HistoryCache``: a request's history enters once, continuing the one its thread's previous
request left, and what was made of the messages they share is found again only for equal
messages (copilot_runtime/history/cache.py)."""

from __future__ import annotations

from typing import Any

from copilot_runtime.history import HistoryCache, KnownHistory, QueuedRun, StoredIds

ALICE, BOB = (1, "t-1"), (2, "t-1")  # two owners' threads under one client thread id


def _history(count: int, *, text: str = "m", start: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"h-{i}", "text": f"{text}{i}"} for i in range(start, start + count)]


def _made(history: KnownHistory, raws: list[Any], made: list[str]) -> list[str]:
    """What a per-message pass makes of ``raws`` with ``history``: the known messages' results
    as they were, each of the others made (and noted in ``made``)."""
    start, stop, known = history.reuse("upper", raws)
    fresh = [raw["text"].upper() for raw in raws[:start]]
    made += [raw["id"] for raw in [*raws[:start], *raws[stop:]]]
    results = [*fresh, *known, *(raw["text"].upper() for raw in raws[stop:])]
    history.keep_each("upper", raws, results, start, stop)
    return results


def test_a_thread_s_next_request_makes_only_its_new_messages() -> None:
    cache = HistoryCache()
    made: list[str] = []
    first = cache.enter("r", _history(3), thread=ALICE)
    assert _made(first, first.raws, made) == ["M0", "M1", "M2"]

    # Parsed anew from the next request: equal messages, other objects.
    second = cache.enter("r", _history(5), thread=ALICE)

    assert _made(second, second.raws, made) == ["M0", "M1", "M2", "M3", "M4"]
    assert made == ["h-0", "h-1", "h-2", "h-3", "h-4"]
    assert cache.of_thread(ALICE) is second
    assert len(cache) == 1 and cache.messages == 5  # in place of the first


def test_a_changed_message_is_made_again_and_so_is_what_follows_it() -> None:
    cache = HistoryCache()
    made: list[str] = []
    first = cache.enter("r", _history(4), thread=ALICE)
    _made(first, first.raws, [])
    edited = _history(4)
    edited[2]["text"] = "edited"

    history = cache.enter("r", edited, thread=ALICE)
    results = _made(history, edited, made)

    assert results == ["M0", "M1", "EDITED", "M3"]
    assert made == ["h-2", "h-3"]


def test_a_shorter_history_takes_what_was_made_of_the_messages_it_keeps() -> None:
    # A regenerated reply: the client sends the history without its last message.
    cache = HistoryCache()
    made: list[str] = []
    first = cache.enter("r", _history(4), thread=ALICE)
    _made(first, first.raws, [])
    first.keep("whole", first.raws, "after four")

    shorter = cache.enter("r", _history(3), thread=ALICE)

    assert _made(shorter, shorter.raws, made) == ["M0", "M1", "M2"] and made == []
    # A pass over the whole history cannot resume from a state past the end.
    assert shorter.resume("whole", shorter.raws) == (0, None)


def test_equal_values_of_different_types_are_never_taken_for_each_other() -> None:
    """``True == 1 == 1.0`` in Python: a message holding a number or a Boolean is known again
    only as the very object it was (read from the same bytes), never by equality."""
    cache = HistoryCache()
    with_number = [*_history(2), {"id": "n", "state": {"done": True}}, *_history(1, start=3)]
    first = cache.enter("r", with_number, thread=ALICE)
    _made_states(first, with_number)

    other = [*_history(2), {"id": "n", "state": {"done": 1}}, *_history(1, start=3)]
    second = cache.enter("r", other, thread=ALICE)

    assert second.reuse("state", other)[:2] == (0, 2)  # equal up to the message with a number
    _made_states(second, other)
    third = cache.enter("r", list(other), thread=ALICE)  # the same objects: known whole
    assert third.reuse("state", third.raws)[:2] == (0, 4)


def _made_states(history: KnownHistory, raws: list[Any]) -> None:
    start, stop, known = history.reuse("state", raws)
    results = [repr(raw) for raw in raws[:start]] + known + [repr(raw) for raw in raws[stop:]]
    history.keep_each("state", raws, results, start, stop)


def test_a_history_behind_a_fresh_first_message_is_known_from_its_second() -> None:
    # The v1 client sends its instructions first, under a fresh id in every request.
    cache = HistoryCache()
    made: list[str] = []
    first = cache.enter("r", [{"id": "sys-1", "text": "be brief"}, *_history(3)])
    _made(first, first.raws, [])

    raws = [{"id": "sys-2", "text": "be brief"}, *_history(4)]
    second = cache.enter("r", raws)

    assert _made(second, raws, made) == ["BE BRIEF", "M0", "M1", "M2", "M3"]
    assert made == ["sys-2", "h-3"]
    assert len(cache) == 1  # the first request's history is not found again


def test_what_a_process_knows_a_thread_stores_stays_with_that_thread() -> None:
    """Bob's request carrying the very messages of Alice's thread reads them as Alice's were
    read (what was made of equal messages is the same), but what the store told of Alice's
    thread is neither given to Bob's nor lost to it."""
    cache = HistoryCache()
    alices = cache.enter("r", _history(2), thread=ALICE)
    _made(alices, alices.raws, [])
    alices.stored = StoredIds(ALICE, 7, 1, frozenset({"h-0", "h-1"}))
    alices.queued = QueuedRun(ALICE, 7, "run-a", [b"{}", b"{}"], {"h-0": 0, "h-1": 1})

    made: list[str] = []
    bobs = cache.enter("r", _history(3), thread=BOB)
    assert _made(bobs, bobs.raws, made)[:2] == ["M0", "M1"] and made == ["h-2"]
    assert bobs.stored is None and bobs.queued is None

    alices_next = cache.enter("r", _history(3), thread=ALICE)
    assert alices_next.stored == alices.stored and alices_next.queued == alices.queued
    assert cache.of_thread(BOB) is bobs


def test_a_request_that_stores_nothing_leaves_what_is_known_as_it_was() -> None:
    cache = HistoryCache()
    history = cache.enter("r", _history(2), thread=ALICE)
    _made(history, history.raws, [])

    made: list[str] = []
    peek = cache.enter("r", _history(3), thread=ALICE, keep=False)
    _made(peek, peek.raws, made)

    assert made == ["h-2"]
    assert cache.of_thread(ALICE) is history
    assert cache.starting_with("r", "h-0") is history


def test_histories_are_found_per_route() -> None:
    cache = HistoryCache()
    v1 = cache.enter("v1", _history(2))
    _made(v1, v1.raws, [])

    made: list[str] = []
    v2 = cache.enter("v2", _history(2))
    _made(v2, v2.raws, made)

    assert made == ["h-0", "h-1"]
    assert len(cache) == 2


def test_the_bound_is_on_every_history_s_messages_together_oldest_out_first() -> None:
    cache = HistoryCache(size=5)
    a = cache.enter("v1", _history(2, text="a"), thread=(None, "a"))
    b = cache.enter("v2", _history(2, text="b", start=10), thread=(None, "b"))
    cache.enter("v1", list(a.raws), thread=(None, "a"))  # used again: "b" is now the oldest
    cache.enter("v2", _history(2, text="c", start=20), thread=(None, "c"))

    assert cache.messages == 4
    assert cache.of_thread((None, "b")) is None and b not in _found(cache)
    assert cache.of_thread((None, "a")) is not None and cache.of_thread((None, "c")) is not None

    cache.enter("v1", _history(6, start=30), thread=(None, "d"))  # longer than the bound
    assert cache.of_thread((None, "d")) is None and cache.messages == 4

    cache.resize(0)
    assert (len(cache), cache.messages) == (0, 0)
    cache.resize(5)
    cache.enter("v1", _history(5, start=40), thread=(None, "e"))
    assert cache.messages == 5


def test_cleared_nothing_is_known_and_the_whole_bound_is_free_again() -> None:
    cache = HistoryCache(size=4)
    cache.enter("r", _history(2), thread=ALICE)
    cache.enter("r", _history(2, start=10), thread=BOB)
    cache.clear()

    assert (cache.of_thread(ALICE), cache.of_thread(BOB), len(cache)) == (None, None, 0)
    cache.enter("r", _history(3, start=20), thread=(None, "c"))
    cache.enter("r", _history(1, start=30), thread=(None, "d"))
    assert cache.of_thread((None, "c")) is not None and cache.of_thread((None, "d")) is not None


def _found(cache: HistoryCache) -> list[KnownHistory]:
    return list(cache._kept.values())
