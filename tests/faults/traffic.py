"""What the fault tests send and how they read it: v2 runs over SSE with a bearer token, and
the checks every fault ends with (the service serves again, runs end with a code, nothing
stored is lost or written twice)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.faults.conftest import FaultDatabase

RUN_PATH = "/api/copilotkit/agent/default/run"
GRAPHQL_PATH = "/api/copilotkit"
# The promise: serving again within this of the dependency's return.
RECOVERY_SECONDS = 5.0
# After the first success, this many more in a row must succeed.
SUCCESSES_AFTER_RECOVERY = 5
TERMINAL = ("succeeded", "failed", "cancelled", "interrupted")


def fake(directive: dict[str, Any]) -> str:
    return "FAKE: " + json.dumps(directive)


@dataclass
class RunAnswer:
    """One v2 run as the client saw it."""

    status: int
    events: list[dict[str, Any]] = field(default_factory=list)
    body: str = ""

    @property
    def types(self) -> list[str]:
        return [event.get("type", "") for event in self.events]

    @property
    def text(self) -> str:
        contents = [e for e in self.events if e["type"] == "TEXT_MESSAGE_CONTENT"]
        return "".join(event.get("delta", "") for event in contents)

    @property
    def succeeded(self) -> bool:
        return (
            self.status == 200
            and self.types[-1:] == ["RUN_FINISHED"]
            and ("RUN_ERROR" not in self.types)
        )

    @property
    def error_code(self) -> str | None:
        """The clear code of a failed answer: the RUN_ERROR's, or the JSON error's."""
        for event in self.events:
            if event["type"] == "RUN_ERROR":
                return str(event.get("code") or "")
        if self.status != 200:
            try:
                return str(json.loads(self.body).get("code") or "")
            except ValueError:
                return None
        return None


def run_body(thread_id: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "state": {},
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": text}],
    }


def v2_run(base_url: str, token: str, thread_id: str, text: str, timeout: float = 30) -> RunAnswer:
    headers = {"accept": "text/event-stream"}
    if token:  # none: an anonymous caller
        headers["authorization"] = f"Bearer {token}"
    try:
        with httpx.stream(
            "POST", base_url + RUN_PATH, json=run_body(thread_id, text), headers=headers,
            timeout=timeout,
        ) as response:  # fmt: skip
            if response.status_code != 200:
                return RunAnswer(status=response.status_code, body=response.read().decode())
            answer = RunAnswer(status=200)
            buffer = ""
            for chunk in response.iter_text():
                buffer += chunk
                while "\n\n" in buffer:
                    frame, buffer = buffer.split("\n\n", 1)
                    for line in frame.splitlines():
                        if line.startswith("data: "):
                            answer.events.append(json.loads(line[6:]))
            return answer
    except httpx.HTTPError as error:
        return RunAnswer(status=0, body=f"{type(error).__name__}: {error}")


def assert_clear(answer: RunAnswer) -> None:
    """A failed answer in the protocol's own shape: a code, never a page or a traceback."""
    assert "Traceback" not in answer.body and "<html" not in answer.body.lower(), answer.body
    assert answer.status in (200, 503), (answer.status, answer.body)
    assert answer.error_code, (answer.status, answer.body, answer.events)


def recovery_after(
    returned_at: float, attempt: Callable[[int], RunAnswer]
) -> tuple[float, list[RunAnswer]]:
    """Send requests one after another from the dependency's return: the seconds until the
    first success, and the answers before it (each must be clear). Then the next few must all
    succeed: none after the first success may fail."""
    failures: list[RunAnswer] = []
    index = 0
    while True:
        answer = attempt(index)
        index += 1
        if answer.succeeded:
            recovered = time.monotonic() - returned_at
            break
        assert_clear(answer)
        failures.append(answer)
        assert time.monotonic() - returned_at < RECOVERY_SECONDS * 3, [
            (a.status, a.error_code, a.body[:200]) for a in failures
        ]
    for _ in range(SUCCESSES_AFTER_RECOVERY):
        answer = attempt(index)
        index += 1
        assert answer.succeeded, (answer.status, answer.body[:300], answer.types)
    return recovered, failures


@contextmanager
def in_background(
    count: int, work: Callable[[int], RunAnswer]
) -> Iterator[list[Future[RunAnswer]]]:
    with ThreadPoolExecutor(max_workers=count) as pool:
        yield [pool.submit(work, index) for index in range(count)]


def wait_for(condition: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def logged_deltas(database: FaultDatabase, thread_id: str) -> int:
    rows = database.rows(
        "SELECT count(*) FROM conversations_runevent e "
        "JOIN conversations_run r ON r.id = e.run_id "
        "JOIN conversations_thread t ON t.id = r.thread_id "
        "WHERE t.thread_id = %s AND e.type = 'text_delta'",
        [thread_id],
    )
    return int(rows[0][0])


def runs_all_ended(database: FaultDatabase) -> list[tuple[Any, ...]]:
    """Every run's (id, status, error code) once none is pending or running."""
    rows = database.rows("SELECT id, status, error_code FROM conversations_run")
    return rows if all(status in TERMINAL for _, status, _ in rows) else []


def assert_runs_ended_with_codes(database: FaultDatabase, *, timeout: float = 20) -> None:
    try:
        ended = wait_for(lambda: runs_all_ended(database), timeout=timeout, what="runs to end")
    except AssertionError:
        active = database.rows(
            "SELECT id, status, heartbeat_at, created_at, now() FROM conversations_run "
            "WHERE status IN ('pending', 'running')"
        )
        raise AssertionError(f"runs still active: {active}") from None
    for run_id, status, code in ended:
        assert status != "failed" or code, f"run {run_id} failed without a code"


def stored_messages(database: FaultDatabase) -> set[tuple[str, str]]:
    """(thread id, message id) of every stored message, checking none is stored twice."""
    rows = database.rows(
        "SELECT t.thread_id, m.message_id FROM conversations_message m "
        "JOIN conversations_thread t ON t.id = m.thread_id WHERE NOT m.superseded"
    )
    assert len(rows) == len(set(rows)), "a message was stored twice"
    return set(rows)
