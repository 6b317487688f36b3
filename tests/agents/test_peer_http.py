"""HTTP to agent peers: headers from settings, retries with capped backoff, timeouts, and
errors that name the peer (against a loopback fixture server)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from agents.peer_http import Peer, PeerCallContext, PeerError, _backoff, peer_post_json
from tests.support.fixture_peer import FixturePeer, Reply

FAST_RETRIES = {"REMOTE_RETRY_BASE_SECONDS": 0.01, "REMOTE_RETRY_MAX_SECONDS": 0.05}


@pytest.fixture
def peer_server() -> Iterator[FixturePeer]:
    with FixturePeer() as server:
        yield server


def _peer(url: str, **options: Any) -> Peer:
    return Peer(kind="remote endpoint", name="tools", url=url + "/copilotkit", **options)


def _context() -> PeerCallContext:
    return PeerCallContext(peer_name="tools", url="x", properties={"tenant": "a"}, thread_id="t1")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def recorded_headers_hook(context: PeerCallContext) -> dict[str, str]:
    return {"X-Tenant": str(context.properties["tenant"]), "X-Thread": str(context.thread_id)}


async def async_headers_hook(context: PeerCallContext) -> dict[str, str]:
    return {"Authorization": f"Bearer for-{context.peer_name}"}


@override_settings(COPILOT_RUNTIME=FAST_RETRIES)
@pytest.mark.parametrize("status", [408, 429, 502, 503, 504])
async def test_retryable_statuses_are_retried(peer_server: FixturePeer, status: int) -> None:
    peer_server.reply("/copilotkit/info", Reply(status=status), Reply.json({"ok": True}))

    answer = await peer_post_json(
        _peer(peer_server.url), path="info", body={"properties": {}}, context=_context()
    )

    assert answer == {"ok": True}
    assert len(peer_server.requests_to("/copilotkit/info")) == 2


@override_settings(COPILOT_RUNTIME=FAST_RETRIES)
async def test_retries_stop_after_three_and_the_error_names_the_peer(
    peer_server: FixturePeer,
) -> None:
    peer_server.reply("/copilotkit/info", Reply.json({"error": "overloaded"}, status=503))

    with pytest.raises(PeerError) as caught:
        await peer_post_json(_peer(peer_server.url), path="info", body={}, context=_context())

    assert len(peer_server.requests_to("/copilotkit/info")) == 4  # the first try + 3 retries
    error = caught.value
    assert error.run_code == "AGENT_ENDPOINT_HTTP_ERROR"
    assert "remote endpoint 'tools'" in error.message
    assert peer_server.url in error.message
    assert "503" in error.message and "overloaded" in error.message


@override_settings(COPILOT_RUNTIME=FAST_RETRIES)
@pytest.mark.parametrize("status", [400, 401, 500])
async def test_other_errors_are_not_retried(peer_server: FixturePeer, status: int) -> None:
    peer_server.reply("/copilotkit/x", Reply.json({"error": "no"}, status=status))

    with pytest.raises(PeerError) as caught:
        await peer_post_json(_peer(peer_server.url), path="x", body={}, context=_context())

    assert len(peer_server.requests) == 1
    assert caught.value.http_status == status


@override_settings(COPILOT_RUNTIME=FAST_RETRIES)
async def test_a_404_is_remote_endpoint_not_found(peer_server: FixturePeer) -> None:
    with pytest.raises(PeerError) as caught:
        await peer_post_json(_peer(peer_server.url), path="nope", body={}, context=_context())

    assert caught.value.run_code == "AGENT_ENDPOINT_NOT_FOUND"
    assert caught.value.code == "REMOTE_ENDPOINT_NOT_FOUND"


@override_settings(COPILOT_RUNTIME=FAST_RETRIES)
async def test_a_down_peer_is_a_clear_error_after_the_retries_never_a_hang() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()

    with pytest.raises(PeerError) as caught:
        await peer_post_json(_peer(url), path="info", body={}, context=_context())

    assert time.monotonic() - started < 5
    error = caught.value
    assert error.run_code == "AGENT_ENDPOINT_UNREACHABLE"
    assert error.message.startswith(
        f"The remote endpoint 'tools' ({url}/copilotkit) is unreachable"
    )
    assert "after 4 attempt(s)" in error.message


@override_settings(COPILOT_RUNTIME={**FAST_RETRIES, "REMOTE_READ_TIMEOUT_SECONDS": 0.3})
async def test_a_silent_peer_times_out(peer_server: FixturePeer) -> None:
    peer_server.reply("/copilotkit/info", Reply(delay_s=3))

    started = time.monotonic()
    with pytest.raises(PeerError) as caught:
        await peer_post_json(_peer(peer_server.url), path="info", body={}, context=_context())

    assert time.monotonic() - started < 2.5
    assert caught.value.run_code == "AGENT_ENDPOINT_TIMEOUT"
    # A read timeout is not retried: the agent may already be at work.
    assert len(peer_server.requests) == 1


@override_settings(COPILOT_RUNTIME=FAST_RETRIES)
async def test_the_peers_timeout_overrides_the_default(peer_server: FixturePeer) -> None:
    peer_server.reply("/copilotkit/info", Reply(delay_s=3))

    with pytest.raises(PeerError):
        await peer_post_json(
            _peer(peer_server.url, timeout_seconds=0.2),
            path="info",
            body={},
            context=_context(),
        )


@override_settings(COPILOT_RUNTIME=FAST_RETRIES)
@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"X-Api-Key": "k"}, {"x-api-key": "k"}),
        ("tests.agents.test_peer_http.recorded_headers_hook", {"x-tenant": "a", "x-thread": "t1"}),
        ("tests.agents.test_peer_http.async_headers_hook", {"authorization": "Bearer for-tools"}),
    ],
)
async def test_headers_come_from_settings_or_a_hook(
    peer_server: FixturePeer, headers: Any, expected: dict[str, str]
) -> None:
    peer_server.reply("/copilotkit/info", Reply.json({}))

    await peer_post_json(
        _peer(peer_server.url, headers=headers), path="info", body={}, context=_context()
    )

    sent = peer_server.requests[0].headers
    assert sent["content-type"] == "application/json"
    assert {key: sent[key] for key in expected} == expected


@override_settings(
    COPILOT_RUNTIME={"REMOTE_RETRY_BASE_SECONDS": 1.0, "REMOTE_RETRY_MAX_SECONDS": 5.0}
)
def test_backoff_doubles_from_one_second_and_is_capped_at_five() -> None:
    assert [_backoff(n, None) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


@override_settings(COPILOT_RUNTIME=FAST_RETRIES)
async def test_the_callers_forwarded_headers_reach_the_peer_and_its_own_win(
    peer_server: FixturePeer,
) -> None:
    peer_server.reply("/copilotkit/info", Reply.json({}))
    context = PeerCallContext(
        peer_name="agent",
        url=peer_server.url,
        forwarded_headers={"authorization": "Bearer user-token", "x-tenant": "from-caller"},
    )

    await peer_post_json(
        _peer(peer_server.url, headers={"X-Tenant": "configured"}),
        path="info",
        body={},
        context=context,
    )

    sent = peer_server.requests[0].headers
    assert sent["authorization"] == "Bearer user-token"
    assert sent["x-tenant"] == "configured"
