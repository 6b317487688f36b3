"""What a process knows of each thread's history: one cache, filled where a request enters.

A CopilotKit client re-sends the whole conversation with every turn. Reading, checking and
converting it again at every turn would make a turn's cost grow with its thread, so the
process remembers, per thread, the history the last request carried (``KnownHistory``):

- its bytes, so that the next request's copy of them is not parsed again (``body.py``, at
  the front door);
- its messages as parsed, and what each layer made of them (*forms*: the v2 check's rows, the
  v1 parse, the model-message conversion, the ids the thread stores...), so that a pass over
  the next request's history resumes where the last one stopped;
- what the thread's storage holds of it (``StoredIds``: its current message ids at its history
  version) and the run that last carried it to a worker (``QueuedRun``).

``HISTORIES.enter`` makes a request's ``KnownHistory`` where the request enters (the protocol
surfaces; on a worker, where a run's task is read) from the one it continues, and the request
carries it down (``TurnRequest.history``): no layer below looks a history up on its own. One
least-recently-used bound, REMEMBERED_MESSAGES, in messages, holds for everything kept.

This package sits below every other: it imports none of the runtime's modules.
"""

from copilot_runtime.history.body import V1, V2, read_body
from copilot_runtime.history.cache import DEFAULT_SIZE, HISTORIES, HistoryCache
from copilot_runtime.history.known import BodyRead, KnownHistory, QueuedRun, StoredIds, ThreadKey

__all__ = [
    "DEFAULT_SIZE",
    "HISTORIES",
    "V1",
    "V2",
    "BodyRead",
    "HistoryCache",
    "KnownHistory",
    "QueuedRun",
    "StoredIds",
    "ThreadKey",
    "read_body",
]
