"""Python's cyclic garbage collector settled for a long-lived server process.

Under a conversation load with the default thresholds, the collector ran young collections
many times a second and, every few seconds, a full collection long enough to stall every
stream in flight, because it walked every object the process had made since it started
(Django, the apps, the schema, the remembered history messages). Freezing what exists once the
application is loaded moves it out of the collector's sight for good, and a larger first
threshold lets most of a request's short-lived containers die by reference count before a
young collection looks at them.

The first threshold is set above what fifty streams in flight hold between them: below that, a
young collection ran several times a second under load and collected nothing. Cycles are still
collected, a threshold's worth of containers later.
"""

from __future__ import annotations

import gc

# Young objects between collections, then the collections of the younger generation between
# those of the next: CPython's defaults are (700, 10, 10).
SERVER_THRESHOLDS = (50_000, 10, 10)


def settle_collector() -> None:
    """Collect once, freeze what survives (the loaded application) and raise the thresholds.
    Call when the process has loaded what it serves with and before it serves."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVER_THRESHOLDS)
