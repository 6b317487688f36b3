"""The v2 route table: paths, decoded ids and the methods each route accepts."""

from __future__ import annotations

import pytest

from copilot_runtime.agui.routes import (
    AGENT_CONNECT,
    AGENT_RUN,
    AGENT_STOP,
    AGENT_SUGGEST,
    INFO,
    THREAD_ARCHIVE,
    THREAD_EVENTS,
    THREAD_MESSAGES,
    THREAD_STATE,
    THREAD_UPDATE,
    THREADS_LIST,
    Route,
    match_route,
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("info", Route(INFO)),
        ("agent/default/run", Route(AGENT_RUN, agent_id="default")),
        ("agent/default/connect", Route(AGENT_CONNECT, agent_id="default")),
        ("agent/default/suggest", Route(AGENT_SUGGEST, agent_id="default")),
        ("agent/default/stop/t-1", Route(AGENT_STOP, agent_id="default", thread_id="t-1")),
        ("agent/my%2Fagent/run", Route(AGENT_RUN, agent_id="my/agent")),
        ("agent/a%20b/stop/t%2F1", Route(AGENT_STOP, agent_id="a b", thread_id="t/1")),
        ("threads", Route(THREADS_LIST)),
        ("threads/", Route(THREADS_LIST)),
        ("threads/t-1", Route(THREAD_UPDATE, thread_id="t-1")),
        ("threads/t-1/messages", Route(THREAD_MESSAGES, thread_id="t-1")),
        ("threads/t-1/state", Route(THREAD_STATE, thread_id="t-1")),
        ("threads/t-1/events", Route(THREAD_EVENTS, thread_id="t-1")),
        ("threads/t-1/archive", Route(THREAD_ARCHIVE, thread_id="t-1")),
    ],
)
def test_known_paths_match(path: str, expected: Route) -> None:
    assert match_route(path) == expected


@pytest.mark.parametrize(
    "path",
    ["", "nope", "agent", "agent/x", "agent/x/fly", "agent/x/stop", "info/more", "threads/%C3%28"],
)
def test_other_paths_match_nothing(path: str) -> None:
    assert match_route(path) is None


def test_each_route_accepts_its_methods() -> None:
    assert Route(INFO).allowed_methods == ("GET",)
    assert Route(THREADS_LIST).allowed_methods == ("GET",)
    assert Route(THREAD_MESSAGES).allowed_methods == ("GET",)
    assert Route(THREAD_UPDATE).allowed_methods == ("PATCH", "DELETE")
    assert Route(AGENT_RUN).allowed_methods == ("POST",)
    assert Route(AGENT_STOP).allowed_methods == ("POST",)
    assert Route(THREAD_ARCHIVE).allowed_methods == ("POST",)
