"""GraphQL subscriptions end to end: the REAL npm websocket clients against daphne.

- graphql-transport-ws: ``graphql-ws`` 6.4.2 (``createClient``);
- legacy graphql-ws: ``subscriptions-transport-ws`` 0.11.0 (``SubscriptionClient``);

both driven by ``tests/e2e/js/ws/ws_client.cjs`` (one operation per Node process). The server
is a real daphne on the test database, its model the fake upstream on loopback.

The server fixture is parametrised by executor (``EXECUTORS``); ``subscription_server_env``
builds its environment, so the same tests can run against ``COPILOT_RUNTIME_EXECUTOR=celery``
once a worker fixture provides the rest.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from conversations.models import Run, RunEvent, RunStatus
from copilot_runtime.auth import do_issue_token
from copilot_runtime.ws.auth import TOKEN_REFUSED
from tests.e2e.js_client import JS_ROOT, ensure_js_clients_installed
from tests.support.generate_e2e import (
    finished_run,
    generate_data,
    server_env,
    text_input,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = pytest.mark.e2e

TRANSPORT = "graphql-transport-ws"
LEGACY = "graphql-ws"
BOTH_PROTOCOLS = pytest.mark.parametrize("protocol", [TRANSPORT, LEGACY])
EXECUTORS = ("inline",)

WS_CLIENT = JS_ROOT / "ws" / "ws_client.cjs"
WS_PATH = "/api/copilotkit"
CLIENT_TIMEOUT_S = 60.0
ALLOWED_ORIGIN = "https://app.example.com"

SCRIPTED_TEXT = "Hello from the websocket, in several words"
# Slow enough to act on while it streams, even on a busy 2-core box: 150 x 40 ms = 6 s.
SLOW_REPLY = {"tokens": 150, "delay_ms": 40}
# Stopped early, so it can be long: 250 x 40 ms = 10 s.
STOPPED_REPLY = {"tokens": 250, "delay_ms": 40}

RUN_EVENT_FIELDS = """
  sequence type threadId runId messageId delta error raw
  message {
    __typename id
    ... on TextMessageOutput { role content }
  }
  status {
    __typename
    ... on BaseResponseStatus { code }
    ... on FailedResponseStatus { reason details }
  }
"""
COPILOT_STREAM = (
    "subscription Stream($data: GenerateCopilotResponseInput!) {"
    f" copilotStream(data: $data) {{ {RUN_EVENT_FIELDS} }} }}"
)
RUN_EVENTS = (
    "subscription Attach($runId: String!, $afterSequence: Int) {"
    f" runEvents(runId: $runId, afterSequence: $afterSequence) {{ {RUN_EVENT_FIELDS} }} }}"
)
STOP_RUN = "mutation Stop($runId: String!) { stopRun(runId: $runId) }"


# --- the server -----------------------------------------------------------------------------


def subscription_server_env(
    fake_base_url: str, *, executor: str = "inline", **extra: str
) -> dict[str, str]:
    """The served process's environment for these tests, for either executor."""
    return server_env(
        fake_base_url,
        COPILOT_RUNTIME_EXECUTOR=executor,
        COPILOT_RUNTIME_EVENT_FLUSH_MS="10",
        **extra,
    )


@pytest.fixture(params=EXECUTORS)
def executor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def start_server(live_server_factory: Any, fake_upstream: FakeUpstream, executor: str) -> Any:
    def start(**extra: str) -> ServedProcess:
        ensure_js_clients_installed()
        env = subscription_server_env(fake_upstream.base_url, executor=executor, **extra)
        return live_server_factory(env=env)

    return start


@pytest.fixture
def server(start_server: Any) -> ServedProcess:
    return start_server()


def ws_url(server: ServedProcess) -> str:
    return server.url.replace("http://", "ws://", 1) + WS_PATH


# --- the Node client ------------------------------------------------------------------------


def _node() -> str:
    node = shutil.which("node")
    assert node is not None, "`node` is not on PATH; these tests need Node >= 20"
    return node


class WsClientRun:
    """One ``ws_client.cjs`` process; ``results_seen`` counts results as they arrive."""

    def __init__(self, command: Mapping[str, Any]) -> None:
        self.command = dict(command)
        self.results_seen = 0
        self._stderr: list[str] = []
        self._process = subprocess.Popen(
            [_node(), str(WS_CLIENT)],
            cwd=WS_CLIENT.parent,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(self.command))
        self._process.stdin.close()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self._stderr.append(line)
            if line.startswith("result "):
                self.results_seen = int(line.split()[1])

    def wait_for_results(self, count: int, *, timeout: float = 20.0) -> None:
        wait_for(
            lambda: self.results_seen >= count or self._process.poll() is not None,
            timeout=timeout,
            what=f"{count} results",
        )
        assert self.results_seen >= count, self.stderr_text()

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=5)

    def stderr_text(self) -> str:
        return "".join(self._stderr)

    def result(self, timeout: float = CLIENT_TIMEOUT_S) -> dict[str, Any]:
        assert self._process.stdout is not None
        try:
            stdout = self._process.stdout.read()
            self._process.wait(timeout=timeout)
        finally:
            if self._process.poll() is None:
                self._process.kill()
        self._reader.join(timeout=5)
        if self._process.returncode != 0:
            raise AssertionError(
                f"ws_client.cjs exited with {self._process.returncode}:\n{self.stderr_text()}"
            )
        return json.loads(stdout)


def ws_command(
    server: ServedProcess,
    protocol: str,
    query: str,
    variables: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    return {
        "protocol": protocol,
        "url": ws_url(server),
        "operation": {"query": query, "variables": dict(variables or {})},
        "timeoutMs": int(CLIENT_TIMEOUT_S * 1000) - 5000,
        **options,
    }


def run_ws(command: Mapping[str, Any]) -> dict[str, Any]:
    return WsClientRun(command).result()


@pytest.fixture
def clients() -> Iterator[list[WsClientRun]]:
    """Background clients started by a test; killed at teardown if still running."""
    started: list[WsClientRun] = []
    yield started
    for client in started:
        client.kill()


# --- helpers --------------------------------------------------------------------------------


def stream_payloads(outcome: Mapping[str, Any], field: str) -> list[dict[str, Any]]:
    for result in outcome["results"]:
        assert not result.get("errors"), result
    return [result["data"][field] for result in outcome["results"]]


def as_logged(payloads: list[dict[str, Any]]) -> list[tuple[int, str, Any]]:
    return [(p["sequence"], p["type"], p["raw"]) for p in payloads]


def logged(run_id: str) -> list[tuple[int, str, Any]]:
    rows = RunEvent.objects.filter(run_id=run_id).order_by("seq")
    return [(row.seq, row.type, row.payload) for row in rows]


def assert_no_server_traceback(server: ServedProcess) -> None:
    text = server.stderr_text()
    assert "Traceback" not in text, text


def joined_text(payloads: list[dict[str, Any]]) -> str:
    return "".join(p["delta"] for p in payloads if p["type"] == "text_delta")


def turn(text: str, *, thread_id: str | None = None) -> dict[str, Any]:
    return {"data": generate_data(thread_id=thread_id, messages=[text_input("u1", text)])}


def fake(directive: Mapping[str, Any]) -> str:
    return "FAKE: " + json.dumps(dict(directive))


def running_run(*, since_count: int = 0) -> Run:
    """The newest run once it streams (its log has text deltas)."""

    def probe() -> Run | None:
        run = Run.objects.order_by("-created_at").first()
        if run is None or run.status != RunStatus.RUNNING:
            return None
        return run if RunEvent.objects.filter(run=run, type="text_delta").exists() else None

    return wait_for(probe, timeout=15, what="a run streaming text")


def single_error(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """The operation's error as the client reported it (graphql-ws: a list of errors;
    subscriptions-transport-ws: the first error)."""
    error = outcome["error"]
    assert error is not None, outcome
    if isinstance(error, list):
        assert len(error) == 1, error
        return error[0]
    return error


# --- copilotStream --------------------------------------------------------------------------


@BOTH_PROTOCOLS
def test_copilot_stream_text_reply(
    protocol: str, server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    outcome = run_ws(
        ws_command(server, protocol, COPILOT_STREAM, turn(fake({"text": SCRIPTED_TEXT})))
    )

    assert outcome["acknowledged"] and outcome["completed"], outcome
    payloads = stream_payloads(outcome, "copilotStream")
    assert [p["sequence"] for p in payloads] == list(range(1, len(payloads) + 1))
    assert payloads[-1]["type"] == "run_finished"
    assert payloads[-1]["status"] == {"__typename": "SuccessResponseStatus", "code": "Success"}
    assert joined_text(payloads) == SCRIPTED_TEXT
    start = next(p for p in payloads if p["type"] == "text_start")
    assert start["message"]["__typename"] == "TextMessageOutput"
    assert start["message"]["content"] == []
    run = finished_run(payloads[0]["runId"])
    assert run.status == RunStatus.SUCCEEDED
    assert run.protocol == "graphql-ws"
    assert as_logged(payloads) == logged(run.pk)
    assert_no_server_traceback(server)


@BOTH_PROTOCOLS
def test_run_events_after_the_run_finished_replays_the_log(
    protocol: str, server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    first = run_ws(ws_command(server, TRANSPORT, COPILOT_STREAM, turn(fake({"tokens": 30}))))
    run_id = stream_payloads(first, "copilotStream")[0]["runId"]
    finished_run(run_id)

    replay = run_ws(ws_command(server, protocol, RUN_EVENTS, {"runId": run_id}))

    payloads = stream_payloads(replay, "runEvents")
    assert replay["completed"], replay
    assert as_logged(payloads) == logged(run_id)
    assert as_logged(payloads) == as_logged(stream_payloads(first, "copilotStream"))
    assert payloads[-1]["status"]["code"] == "Success"


def test_run_events_attached_mid_run_gets_the_backlog_then_the_live_events(
    server: ServedProcess, fake_upstream: FakeUpstream, clients: list[WsClientRun]
) -> None:
    streamer = WsClientRun(ws_command(server, TRANSPORT, COPILOT_STREAM, turn(fake(SLOW_REPLY))))
    clients.append(streamer)
    run = running_run()
    logged_at_attach = len(logged(run.pk))

    attached = run_ws(ws_command(server, LEGACY, RUN_EVENTS, {"runId": run.pk}))

    payloads = stream_payloads(attached, "runEvents")
    full_log = logged(run.pk)
    assert 0 < logged_at_attach < len(full_log)  # attached while it streamed
    assert as_logged(payloads) == full_log  # no gap, no duplicate, same order
    assert payloads[-1]["type"] == "run_finished"
    assert joined_text(payloads) == " ".join(f"t{i}" for i in range(SLOW_REPLY["tokens"]))
    streamed = streamer.result()
    assert as_logged(stream_payloads(streamed, "copilotStream")) == full_log


@BOTH_PROTOCOLS
def test_completing_a_copilot_stream_cancels_the_run(
    protocol: str, server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    outcome = run_ws(
        ws_command(server, protocol, COPILOT_STREAM, turn(fake(STOPPED_REPLY)), completeAfter=3)
    )

    assert outcome["stoppedBy"] == "complete"
    run_id = stream_payloads(outcome, "copilotStream")[0]["runId"]
    run = finished_run(run_id)
    assert run.status == RunStatus.CANCELLED, server.stderr_text() + json.dumps(outcome)
    assert run.output_tokens < STOPPED_REPLY["tokens"]
    wait_for(
        lambda: fake_upstream.stats()["client_closed"] == 1,
        what="the fake upstream to see its request closed",
    )
    assert logged(run_id)[-1][1:] == ("run_finished", {"status": "cancelled"})
    assert_no_server_traceback(server)


@BOTH_PROTOCOLS
def test_dropping_the_socket_without_complete_lets_the_run_finish(
    protocol: str, server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    reply = {"tokens": 40, "delay_ms": 20}
    outcome = run_ws(ws_command(server, protocol, COPILOT_STREAM, turn(fake(reply)), dropAfter=3))

    assert outcome["stoppedBy"] == "drop"
    run = finished_run(stream_payloads(outcome, "copilotStream")[0]["runId"])
    assert run.status == RunStatus.SUCCEEDED
    assert run.output_tokens == reply["tokens"]
    stats = fake_upstream.stats()
    assert (stats["completed"], stats["client_closed"]) == (1, 0), stats
    assert_no_server_traceback(server)


def test_stop_run_from_another_connection_cancels_the_run(
    server: ServedProcess, fake_upstream: FakeUpstream, clients: list[WsClientRun]
) -> None:
    streamer = WsClientRun(ws_command(server, LEGACY, COPILOT_STREAM, turn(fake(SLOW_REPLY))))
    clients.append(streamer)
    run = running_run()

    stopped = run_ws(ws_command(server, TRANSPORT, STOP_RUN, {"runId": run.pk}))

    assert stopped["results"] == [{"data": {"stopRun": True}}]
    payloads = stream_payloads(streamer.result(), "copilotStream")
    final = payloads[-1]
    assert final["type"] == "run_finished"
    assert final["status"]["__typename"] == "FailedResponseStatus"
    assert final["status"]["details"]["code"] == "CANCELLED"
    assert finished_run(run.pk).status == RunStatus.CANCELLED
    again = run_ws(ws_command(server, TRANSPORT, STOP_RUN, {"runId": run.pk}))
    assert again["results"] == [{"data": {"stopRun": False}}]
    # The mutation is GraphQL like any other: over HTTP too.
    over_http = httpx.post(
        server.url + WS_PATH, json={"query": STOP_RUN, "variables": {"runId": run.pk}}
    )
    assert over_http.json() == {"data": {"stopRun": False}}
    assert_no_server_traceback(server)


# --- errors and refusals --------------------------------------------------------------------


@BOTH_PROTOCOLS
def test_another_users_run_is_not_found_exactly_like_an_unknown_run(
    protocol: str,
    server: ServedProcess,
    fake_upstream: FakeUpstream,
    user: Any,
    other_user: Any,
) -> None:
    _row, owner_token = do_issue_token(user=user, name="owner")
    _row, other_token = do_issue_token(user=other_user, name="other")
    mine = run_ws(
        ws_command(
            server,
            TRANSPORT,
            COPILOT_STREAM,
            turn("private"),
            connectionParams={"authorization": f"Bearer {owner_token}"},
        )
    )
    run_id = stream_payloads(mine, "copilotStream")[0]["runId"]
    finished_run(run_id)

    as_other = {"connectionParams": {"token": other_token}}
    theirs = run_ws(ws_command(server, protocol, RUN_EVENTS, {"runId": run_id}, **as_other))
    unknown = run_ws(ws_command(server, protocol, RUN_EVENTS, {"runId": "no-such-run"}, **as_other))
    stop = run_ws(ws_command(server, TRANSPORT, STOP_RUN, {"runId": run_id}, **as_other))

    assert theirs["acknowledged"] and theirs["results"] == []
    assert single_error(theirs) == single_error(unknown)
    assert single_error(theirs)["message"] == "Run not found"
    assert single_error(theirs)["extensions"]["code"] == "NOT_FOUND"
    assert stop["results"][0]["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    assert Run.objects.get(pk=run_id).status == RunStatus.SUCCEEDED


@BOTH_PROTOCOLS
def test_a_bad_document_gets_an_error_message(protocol: str, server: ServedProcess) -> None:
    outcome = run_ws(ws_command(server, protocol, "subscription { runEvents(runId: "))

    error = single_error(outcome)
    assert "Syntax Error" in error["message"]
    assert error["extensions"]["code"] == "BAD_REQUEST"
    assert outcome["acknowledged"]


@BOTH_PROTOCOLS
def test_an_invalid_token_is_refused_with_a_reason(protocol: str, server: ServedProcess) -> None:
    outcome = run_ws(
        ws_command(
            server,
            protocol,
            RUN_EVENTS,
            {"runId": "x"},
            connectionParams={"authorization": "Bearer not-a-token"},
        )
    )

    assert not outcome["acknowledged"]
    assert outcome["results"] == []
    if protocol == TRANSPORT:
        # daphne sends the close code but drops the close reason (see the report).
        assert outcome["closed"]["code"] == 4403, outcome
    else:
        assert outcome["connectionError"]["message"] == TOKEN_REFUSED, outcome
    assert "invalid close code" not in server.stderr_text()


@BOTH_PROTOCOLS
def test_a_disallowed_origin_is_refused_at_the_handshake(protocol: str, start_server: Any) -> None:
    server = start_server(COPILOT_RUNTIME_CORS_ALLOWED_ORIGINS=ALLOWED_ORIGIN)

    refused = run_ws(
        ws_command(
            server, protocol, RUN_EVENTS, {"runId": "x"}, headers={"Origin": "https://evil.example"}
        )
    )
    allowed = run_ws(
        ws_command(server, protocol, RUN_EVENTS, {"runId": "x"}, headers={"Origin": ALLOWED_ORIGIN})
    )

    assert not refused["acknowledged"] and refused["results"] == []
    assert "403" in json.dumps(refused["connectionError"]), refused
    assert allowed["acknowledged"], allowed
    assert single_error(allowed)["extensions"]["code"] == "NOT_FOUND"
