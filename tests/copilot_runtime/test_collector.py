"""The garbage collector settled for a server process: what is loaded is frozen out of the
collector's sight, the thresholds are raised, and garbage made afterwards is still collected."""

from __future__ import annotations

import gc
import importlib
import weakref

import pytest
from celery.signals import worker_process_init

from copilot_runtime.collector import SERVER_THRESHOLDS, settle_collector

pytestmark = pytest.mark.usefixtures("collector_restored")


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def tracked(obj: object) -> bool:
    return any(candidate is obj for candidate in gc.get_objects())


def test_what_is_loaded_is_frozen_and_the_thresholds_raised() -> None:
    loaded = Node()
    assert tracked(loaded)

    settle_collector()

    assert gc.get_freeze_count() > 0 and not tracked(loaded)
    assert gc.get_threshold() == SERVER_THRESHOLDS


def test_cycles_made_after_the_freeze_are_still_collected_without_being_asked() -> None:
    settle_collector()
    first, second = Node(), Node()
    first.other, second.other = second, first  # a cycle reference counting cannot free
    gone = weakref.ref(first)
    del first, second

    # More live containers than the first threshold: a young collection runs by itself.
    allocated = [[] for _ in range(2 * SERVER_THRESHOLDS[0])]

    assert gone() is None
    assert len(allocated) == 2 * SERVER_THRESHOLDS[0]


def test_a_celery_pool_process_settles_its_collector_when_it_starts() -> None:
    importlib.import_module("copilot_runtime.tasks")  # connects the signal, as a worker does

    gc.set_threshold(700, 10, 10)
    worker_process_init.send(sender=None)

    assert gc.get_threshold() == SERVER_THRESHOLDS
