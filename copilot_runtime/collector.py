"""Python's cyclic garbage collector settled for a long-lived server process.

Measured on the conversation load (v1, 50 users, one web process): with the default
thresholds the collector ran about 50 young collections a second and a full collection every
2-3 s that took about 90 ms, because it walked every object the process had made since it
started (Django, the apps, the schema, the remembered history messages): a stall for every
stream in flight and about a tenth of each request's CPU. Freezing what exists once the
application is loaded moves it out of the collector's sight for good, and a larger first
threshold lets most of a request's short-lived containers die by reference count before a
young collection looks at them. The figures, before and after, are in benchmarks/README.md
("The garbage collector").

The first threshold was 10,000 until the hot path served about 1,100 requests a second: the
fifty streams in flight then held some 19,000 containers between them, so a young collection
ran eight to eleven times a second, about 3 ms each, collecting nothing (3.5 % of the CPU).
At 50,000 none runs in the same load; cycles are still collected, 50,000 containers later
("The garbage collector, again" in benchmarks/README.md).
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
