"""Scripted directives, recorded requests and counters, shared by the server and its owner.

A plain `threading.Lock` guards everything: the server's event loop runs in its own thread in
test mode while the test thread queues directives and reads the records, and every critical
section is a few dictionary operations, so the lock never blocks the loop for long.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from benchmarks.fake_upstream.directives import Directive

DEFAULT_MAX_RECORDED_REQUESTS = 10_000

COUNTER_NAMES = (
    "requests",  # chat requests received
    "completed",  # chat responses fully written (replies and scripted errors)
    "errors",  # scripted error responses (also counted in completed)
    "cut_off",  # fail_after_tokens responses closed on purpose
    "client_closed",  # responses whose client went away before they finished
    "active",  # chat responses in flight
)


class FakeState:
    def __init__(self, *, max_recorded_requests: int = DEFAULT_MAX_RECORDED_REQUESTS) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Directive] = deque()
        # Bounded so a long benchmark run does not grow the process without limit.
        self._recorded: deque[Mapping[str, Any]] = deque(maxlen=max_recorded_requests)
        self._counters = dict.fromkeys(COUNTER_NAMES, 0)
        # Never reset: tool-call ids stay unique for the life of the server.
        self._sequence = 0

    def enqueue(self, directives: Iterable[Directive]) -> int:
        with self._lock:
            self._queue.extend(directives)
            return len(self._queue)

    def next_directive(self) -> Directive | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def record_request(self, body: Mapping[str, Any]) -> int:
        """Record a chat request body; returns its sequence number."""
        with self._lock:
            self._sequence += 1
            self._counters["requests"] += 1
            self._recorded.append(body)
            return self._sequence

    def count(self, name: str, delta: int = 1) -> None:
        with self._lock:
            self._counters[name] += delta

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._recorded.clear()
            active = self._counters["active"]
            self._counters = dict.fromkeys(COUNTER_NAMES, 0)
            # Responses still in flight will decrement it when they end.
            self._counters["active"] = active

    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            recorded = list(self._recorded)
        return [copy.deepcopy(dict(body)) for body in recorded]

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {**self._counters, "queued": len(self._queue)}
