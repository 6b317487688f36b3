"""The served Node drivers (``tests/e2e/node_driver.py``, ``tests/e2e/js/serve.cjs``): one
long-lived process per driver and worker answers as a fresh one-shot process would, keeps
nothing from one command to the next, and is thrown away (and replaced by the next call) when
a command times out or it dies.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e import js_client
from tests.e2e.agui_client import run_agui, served_agui_driver
from tests.e2e.js_client import (
    JS_CLIENT_VERSIONS,
    JsClientError,
    ensure_js_clients_installed,
    run_js,
    served_gql_driver,
)
from tests.e2e.node_driver import ONE_SHOT_ENV, ServedDriver
from tests.support.waiting import eventually
from tests.support.workers import free_port

if TYPE_CHECKING:
    from tests.conftest import ServedProcess

pytestmark = pytest.mark.e2e

# Response headers that differ between any two requests, whoever sends them.
VOLATILE = {"date"}
DRIVER_SCRIPTS = ("gql_client.cjs", "agui_client.cjs")


@pytest.fixture(autouse=True)
def _served_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    # These tests are about the served drivers, even in a run that forces one-shot elsewhere.
    monkeypatch.delenv(ONE_SHOT_ENV, raising=False)
    ensure_js_clients_installed()


@pytest.fixture
def one_shot_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The argv of every one-shot driver process the helpers start during the test."""
    started: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        if any(str(part).endswith(DRIVER_SCRIPTS) for part in argv):
            started.append([str(part) for part in argv])
        return real_run(argv, *args, **kwargs)

    # One `subprocess` module for both helpers; only the drivers' runs are counted.
    monkeypatch.setattr(js_client.subprocess, "run", counting_run)
    return started


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A URL whose server accepts connections and never answers: a command on it hangs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/api/copilotkit"


def without_volatile_headers(result: dict[str, Any]) -> dict[str, Any]:
    exchanges = [
        {**exchange, "headers": {k: v for k, v in exchange["headers"].items() if k not in VOLATILE}}
        for exchange in result["http"]
    ]
    return {**result, "http": exchanges}


# --- the same answers both ways ---------------------------------------------------------------


def test_gql_served_and_one_shot_answers_are_the_same(
    server: ServedProcess, monkeypatch: pytest.MonkeyPatch, one_shot_runs: list[list[str]]
) -> None:
    command = {"op": "availableAgents", "url": f"{server.url}/api/copilotkit", "headers": {}}
    for version in JS_CLIENT_VERSIONS:
        served = run_js(version, command)
        assert served_gql_driver(version).pid is not None
        assert one_shot_runs == []

        monkeypatch.setenv(ONE_SHOT_ENV, "1")
        one_shot = run_js(version, command)
        monkeypatch.delenv(ONE_SHOT_ENV)

        assert len(one_shot_runs) == 1 and "--serve" not in one_shot_runs[0]
        one_shot_runs.clear()
        assert served["errors"] == [], served
        assert served["data"]["availableAgents"]["agents"] is not None
        assert without_volatile_headers(served) == without_volatile_headers(one_shot)


def test_agui_served_and_one_shot_answers_are_the_same(
    server: ServedProcess, monkeypatch: pytest.MonkeyPatch, one_shot_runs: list[list[str]]
) -> None:
    # Runtime auto-detection only (GET /info): no ids or timings in the answer.
    command = {"runtimeUrl": f"{server.url}/api/copilotkit", "threadId": "same", "steps": []}

    served = run_agui(command)
    assert served_agui_driver().pid is not None
    assert one_shot_runs == []
    monkeypatch.setenv(ONE_SHOT_ENV, "1")
    one_shot = run_agui(command)

    assert len(one_shot_runs) == 1 and "--serve" not in one_shot_runs[0]
    assert served["connection"] == "connected", served["stderr"]
    assert served == one_shot


# --- nothing crosses from one command to the next ---------------------------------------------


def test_each_command_has_only_its_own_output() -> None:
    first_port, second_port = free_port(), free_port()

    first = run_agui({"runtimeUrl": f"http://127.0.0.1:{first_port}/x", "timeoutMs": 300})
    second = run_agui({"runtimeUrl": f"http://127.0.0.1:{second_port}/x", "timeoutMs": 300})

    # The client warns that it could not load the runtime info, naming the URL.
    assert f":{first_port}/" in first["stderr"]
    assert f":{second_port}/" in second["stderr"]
    assert f":{first_port}/" not in second["stderr"]
    assert [e["url"] for e in second["http"]] == [
        f"http://127.0.0.1:{second_port}/x/info",
        f"http://127.0.0.1:{second_port}/x",
    ]


@pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)
def test_a_command_leaves_no_keep_alive_connection_behind(version: str) -> None:
    # The server keeps the connection open after answering; only the client can end it, and
    # the served driver must (as a one-shot process does by exiting): a later command must
    # never reuse a socket to a server that may have stopped since.
    hung_up = threading.Event()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/ping"

        def answer_and_keep_open() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.settimeout(10)
                request = b""
                while b"\r\n\r\n" not in request:
                    request += connection.recv(4096)
                # Keep-Alive's hint outlasts the wait below: an idle socket would stay pooled.
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n"
                    b"Keep-Alive: timeout=60\r\n\r\n{}"
                )
                try:
                    if connection.recv(1) == b"":
                        hung_up.set()
                except OSError:
                    pass  # a reset is a hang-up too, but leave the verdict to the event

        server = threading.Thread(target=answer_and_keep_open, daemon=True)
        server.start()
        result = run_js(version, {"op": "raw", "url": url, "method": "GET"})
        assert (result["status"], result["text"]) == (200, "{}")
        assert hung_up.wait(5), "the driver kept the keep-alive connection open"
        assert served_gql_driver(version).pid is not None  # and it was the served driver
        server.join(5)


# --- a hung or dead process is replaced -------------------------------------------------------


def hanging_command(driver: str, url: str) -> dict[str, Any]:
    if driver == "agui":
        return {"runtimeUrl": url, "timeoutMs": 60_000, "steps": []}
    return {"op": "raw", "url": url, "method": "GET"}


def quick_command(driver: str) -> dict[str, Any]:
    url = f"http://127.0.0.1:{free_port()}/api/copilotkit"
    if driver == "agui":
        return {"runtimeUrl": url, "timeoutMs": 300, "steps": []}
    return {"op": "raw", "url": url, "method": "GET"}


DRIVERS: dict[str, tuple[Callable[..., dict[str, Any]], Callable[[], ServedDriver]]] = {
    "gql": (
        lambda command, **kw: run_js(JS_CLIENT_VERSIONS[-1], command, **kw),
        lambda: served_gql_driver(JS_CLIENT_VERSIONS[-1]),
    ),
    "agui": (run_agui, served_agui_driver),
}


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_timed_out_command_discards_the_process_and_the_next_call_works(
    driver: str, silent_url: str
) -> None:
    run, served = DRIVERS[driver]
    run(quick_command(driver))
    first_pid = served().pid
    assert first_pid is not None

    with pytest.raises(JsClientError, match=r"timed out after 1\.5s"):
        run(hanging_command(driver, silent_url), timeout=1.5)

    assert served().pid is None
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(first_pid, 0)
    result = run(quick_command(driver))
    assert result.get("errors") or result.get("connection") == "error"
    second_pid = served().pid
    assert second_pid is not None and second_pid != first_pid


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_process_dying_mid_command_raises_and_the_next_call_works(
    driver: str, silent_url: str
) -> None:
    run, served = DRIVERS[driver]
    run(quick_command(driver))
    pid = served().pid
    assert pid is not None

    threading.Timer(0.5, os.kill, (pid, 9)).start()
    with pytest.raises(JsClientError, match=r"exited with -9"):
        run(hanging_command(driver, silent_url), timeout=30)

    run(quick_command(driver))
    assert served().pid not in (None, pid)


def test_a_process_that_died_between_commands_is_replaced_quietly() -> None:
    run, served = DRIVERS["gql"]
    run(quick_command("gql"))
    pid = served().pid
    assert pid is not None
    os.kill(pid, 9)
    # Dead once reaped: a killed process's first thread is a zombie before the others are gone.
    asyncio.run(eventually(lambda: served().pid is None, what="the killed driver reaped", within=5))

    run(quick_command("gql"))
    assert served().pid not in (None, pid)


def test_a_call_while_the_driver_is_busy_runs_one_shot(one_shot_runs: list[list[str]]) -> None:
    request_arrived = threading.Event()
    # The served driver stays busy on this request until the call made meanwhile has returned.
    answer_now = threading.Event()

    class SlowHandler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return  # keep pytest output clean

        def do_GET(self) -> None:
            request_arrived.set()
            answer_now.wait(30)
            self.send_response(200)
            self.send_header("Content-Length", "4")
            self.end_headers()
            self.wfile.write(b"slow")

    slow_server = ThreadingHTTPServer(("127.0.0.1", 0), SlowHandler)
    threading.Thread(target=slow_server.serve_forever, daemon=True).start()
    version = JS_CLIENT_VERSIONS[0]
    try:
        run_js(version, quick_command("gql"))  # the served driver is up
        pid = served_gql_driver(version).pid
        slow_url = f"http://127.0.0.1:{slow_server.server_address[1]}/slow"
        slow: dict[str, Any] = {}
        busy = threading.Thread(
            target=lambda: slow.update(run_js(version, {"op": "raw", "url": slow_url}))
        )
        busy.start()
        assert request_arrived.wait(10)

        meanwhile = run_js(version, quick_command("gql"))
        answer_now.set()

        busy.join(10)
    finally:
        answer_now.set()
        slow_server.shutdown()
        slow_server.server_close()
    assert meanwhile["op"] == "raw" and meanwhile["status"] is None
    assert len(one_shot_runs) == 1 and "--serve" not in one_shot_runs[0]
    assert slow["text"] == "slow"
    assert served_gql_driver(version).pid == pid


# --- the protocol's failures, with a stand-in driver ------------------------------------------

# Reads one command, answers with a line that is not JSON, then waits for more.
NOT_JSON_DRIVER = "import sys; sys.stdin.readline(); print('oops', flush=True); sys.stdin.read()"


def test_a_reply_that_is_not_json_discards_the_process(tmp_path: Path) -> None:
    driver = ServedDriver("stand-in", [sys.executable, "-c", NOT_JSON_DRIVER], tmp_path)
    try:
        with pytest.raises(JsClientError, match="not its JSON reply"):
            driver.call({"op": "anything"}, timeout=10)
        assert driver.pid is None
    finally:
        driver.stop()
