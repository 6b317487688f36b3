"""The pass that picks a turn's stored messages out of its history (``stored_by_id``): a
history re-sent with the next turn is picked from where the last pass stopped (its known
history, copilot_runtime/history), and the result is always the one a pass over the whole
history gives."""

from __future__ import annotations

import random
from typing import Any

import pytest

from conversations.store.pg import history_ids
from copilot_runtime.events.request import InputMessage
from copilot_runtime.history import HistoryCache, KnownHistory
from tests.support.history_forms import count_resumes


def _message(rng: random.Random, n: int, seed: int) -> InputMessage:
    choice = rng.randrange(6)
    if choice == 0:
        return InputMessage(id=f"s{seed}-{n}", kind="text", role="system", content="note")
    if choice == 1:  # an id the history already carries: its first message is the one stored
        return InputMessage(id=f"m{seed}-{rng.randrange(max(1, n))}", kind="text", role="user")
    if choice == 2:
        return InputMessage(id=f"a{seed}-{n}", kind="action_execution", action_name="act")
    return InputMessage(id=f"m{seed}-{n}", kind="text", role=rng.choice(["user", "assistant"]))


def _identities(picked: dict[str, Any]) -> list[tuple[str, int]]:
    return [(message_id, id(message)) for message_id, message in picked.items()]


def _entered(cache: HistoryCache, messages: list[InputMessage]) -> KnownHistory:
    """The history of the thread's next request, carrying ``messages``."""
    return cache.enter("test", messages, thread=(None, "t"))


def test_a_growing_history_gives_what_a_whole_pass_gives_and_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resumed = count_resumes(monkeypatch, history_ids._STORED_BY_ID)
    for seed in range(30):
        rng = random.Random(seed)
        cache = HistoryCache()
        history = [InputMessage(id=f"first-{seed}", kind="text", role="user")]
        for turn in range(10):
            history = [*history, *(_message(rng, len(history) + k, seed) for k in range(3))]
            picked = history_ids.stored_by_id(history, _entered(cache, history))
            from_scratch = _identities(history_ids.stored_by_id(history, None))
            assert _identities(picked) == from_scratch, (seed, turn)
            assert not any(m.role == "system" for m in picked.values())
            # Every turn after the first resumed after all of the last turn's messages.
            assert resumed[-1] == (0 if turn == 0 else len(history) - 3)


def test_a_history_that_changed_is_picked_again_from_its_start() -> None:
    cache = HistoryCache()
    one = InputMessage(id="x-1", kind="text", role="user")
    two = InputMessage(id="x-2", kind="text", role="assistant")
    history_ids.stored_by_id([one, two], _entered(cache, [one, two]))
    # The same ids as other objects (an edited message comes back parsed anew).
    edited = InputMessage(id="x-2", kind="text", role="assistant", content="edited")
    messages = [one, edited, InputMessage(id="x-3", kind="text")]
    picked = history_ids.stored_by_id(messages, _entered(cache, messages))
    assert picked["x-2"] is edited
    assert list(picked) == ["x-1", "x-2", "x-3"]


def test_an_id_minted_for_a_message_without_one_is_never_resumed_from() -> None:
    cache = HistoryCache()
    head = InputMessage(id="y-1", kind="text", role="user")
    anonymous = InputMessage(id="", kind="text", role="assistant")
    known = _entered(cache, [head, anonymous])
    picked = history_ids.stored_by_id([head, anonymous], known)
    assert anonymous.id.startswith("ck-") and picked[anonymous.id] is anonymous
    done, _kept = known.resume(history_ids._STORED_BY_ID, [head, anonymous])
    assert done == 0  # the pass that minted it kept nothing
