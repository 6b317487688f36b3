"""The fast lane: every use of another library's private names, in one package, behind one
switch.

The runtime's speed on the worker and the channel layer rests partly on the inside of the
libraries it adapts to: kombu's Redis transport, Celery's worker strategy, channels_redis's
pub/sub layer, redis-py's asyncio connection and strawberry's graphql-core schema. Those
insides change between releases without notice, and a host project chooses the versions. So
each such use lives here, one module per library, and is taken only where

- ``COPILOT_RUNTIME["FAST_LANE"]`` is true (the default), and
- the installed version of that library is one the suite has run the fast lane with
  (``TESTED``: the versions of ``requirements.lock`` and ``requirements-newest.lock``;
  tests/copilot_runtime/fastlane/test_switch.py holds the two to each other).

Otherwise each module does what the library's public API does (kombu's stock transport,
Celery's stock strategy, the channel layer's ``group_send`` and ``new_channel``, redis-py's
``execute_command``, a schema built through strawberry's public converter), and the system
check ``copilot_runtime.W011`` names the library version that closed its lane.
docs/production.md ("The fast lane") says what each lane gives and what it changes.
"""

from __future__ import annotations

from functools import cache
from importlib import metadata

from copilot_runtime.conf import runtime_setting

# The distributions whose private names a lane uses, and the versions the suite ran it with.
TESTED: dict[str, frozenset[str]] = {
    "kombu": frozenset({"5.6.2", "5.7.0"}),
    "celery": frozenset({"5.6.3", "5.7.0"}),
    "channels-redis": frozenset({"4.3.0"}),
    "redis": frozenset({"8.1.0", "8.2.0"}),
    "strawberry-graphql": frozenset({"0.341.2", "0.341.3"}),
}


@cache
def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None where it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def switched_on() -> bool:
    """``COPILOT_RUNTIME["FAST_LANE"]``: False closes every lane, whatever the versions."""
    return bool(runtime_setting("FAST_LANE"))


def lane_open(distribution: str) -> bool:
    """Whether the lane of ``distribution`` (a key of ``TESTED``) is taken in this process."""
    return switched_on() and installed_version(distribution) in TESTED[distribution]


def closed_by_version(*, switch: bool | None = None) -> list[tuple[str, str]]:
    """(distribution, installed version) for each installed library whose version keeps its
    lane closed although the switch (``switch``, else the setting) is on."""
    if not (switched_on() if switch is None else switch):
        return []
    closed = []
    for distribution, tested in TESTED.items():
        version = installed_version(distribution)
        if version is not None and version not in tested:
            closed.append((distribution, version))
    return closed
