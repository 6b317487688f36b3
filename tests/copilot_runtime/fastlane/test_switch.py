"""The fast lane's one switch: each library's lane is open only for the versions the suite ran
it with, and a closed lane is named by the system check."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from copilot_runtime import fastlane
from tests.copilot_runtime.conftest import UNTESTED_VERSION
from tests.support.locks import LOCKS, pinned


def test_the_tested_versions_are_those_of_the_two_locks() -> None:
    # A lock moved to another release of one of these libraries is a release the suite has
    # not run the lane with until TESTED says so (and the suite runs on that lock).
    locks = [pinned(lock) for lock in LOCKS]
    for distribution, tested in fastlane.TESTED.items():
        assert tested == {lock[distribution] for lock in locks}, distribution


def test_the_suites_own_versions_have_every_lane_open() -> None:
    assert fastlane.closed_by_version() == []
    assert all(fastlane.lane_open(distribution) for distribution in fastlane.TESTED)


def _warnings() -> list[str]:
    return [str(message.msg) for message in run_checks() if message.id == "copilot_runtime.W011"]


def test_an_untested_version_closes_its_lane_alone_and_the_check_names_it(
    untested_version: Callable[[str], None],
) -> None:
    untested_version("kombu")
    assert not fastlane.lane_open("kombu")
    assert fastlane.lane_open("celery")
    assert fastlane.closed_by_version() == [("kombu", UNTESTED_VERSION)]
    (warning,) = _warnings()
    assert f"kombu {UNTESTED_VERSION} is not a version it was tested with" in warning
    for tested in fastlane.TESTED["kombu"]:
        assert tested in warning


@pytest.mark.parametrize("distribution", sorted(fastlane.TESTED))
def test_the_switch_off_closes_every_lane_without_a_warning(
    distribution: str, untested_version: Callable[[str], None]
) -> None:
    untested_version("redis")
    with override_settings(COPILOT_RUNTIME={"FAST_LANE": False}):
        assert not fastlane.lane_open(distribution)
        assert fastlane.closed_by_version() == []
        assert _warnings() == []


def test_a_library_that_is_not_installed_is_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastlane, "installed_version", lambda name: None)
    assert fastlane.closed_by_version() == []
    assert not fastlane.lane_open("strawberry-graphql")
