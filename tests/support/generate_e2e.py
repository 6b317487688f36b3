"""Helpers for the end-to-end ``generateCopilotResponse`` tests (tests/e2e/test_generate_*.py).

Request builders produce ``GenerateCopilotResponseInput`` variables shaped like the ones
react-core sends; the DB helpers poll, because the served process commits a run's last rows
(its final status, usage, the last batch of its event log) just after the stream ends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from conversations.models import Message, Run, RunEvent

GRAPHQL_PATH = "/api/copilotkit"
SERVER_ACTIONS = "tests.support.actions.server_add,tests.support.actions.always_fails"
CLIENT_CREATED_AT = "2025-01-01T00:00:00.000Z"
TRACEBACK_MARKERS = ("Traceback", 'File "')

SAY_HELLO_ACTION: dict[str, Any] = {
    "name": "sayHello",
    "description": "Say hello to someone in the browser.",
    "jsonSchema": json.dumps(
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    ),
    "available": "enabled",
}

T = TypeVar("T")


def server_env(fake_base_url: str, **extra: str) -> dict[str, str]:
    """The served process's environment: the fake upstream, no retries, the test actions."""
    return {
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": fake_base_url,
        "COPILOT_RUNTIME_OPENAI_MAX_RETRIES": "0",
        "COPILOT_RUNTIME_ACTIONS": SERVER_ACTIONS,
        **extra,
    }


def runtime_settings(fake_base_url: str, **extra: Any) -> dict[str, Any]:
    """``COPILOT_RUNTIME`` for turns executed in the test process: the fake upstream, no
    retries."""
    return {
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": fake_base_url,
        "OPENAI_MAX_RETRIES": 0,
        **extra,
    }


def text_input(
    message_id: str, content: str, *, role: str = "user", parent_message_id: str | None = None
) -> dict[str, Any]:
    """A ``MessageInput`` holding a text message, as ``convertMessagesToGqlInput`` builds it."""
    text: dict[str, Any] = {"content": content, "role": role}
    if parent_message_id is not None:
        text["parentMessageId"] = parent_message_id
    return {"id": message_id, "createdAt": CLIENT_CREATED_AT, "textMessage": text}


def generate_data(
    *,
    thread_id: str | None,
    messages: Iterable[Mapping[str, Any]],
    actions: Iterable[Mapping[str, Any]] = (),
    request_type: str = "Chat",
    forwarded: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    page_url: str = "http://127.0.0.1/chat",
) -> dict[str, Any]:
    """``GenerateCopilotResponseInput`` variables like react-core's ``use-chat`` sends them."""
    data: dict[str, Any] = {
        "frontend": {"actions": [dict(action) for action in actions], "url": page_url},
        "runId": run_id,
        "messages": [dict(message) for message in messages],
        "metadata": {"requestType": request_type},
        "forwardedParameters": dict(forwarded or {}),
    }
    if thread_id is not None:
        data["threadId"] = thread_id
    return data


def generate_command(
    server_url: str,
    data: Mapping[str, Any],
    *,
    properties: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """A driver ``generate`` command against ``server_url`` (abortAfterMs etc. in options)."""
    command: dict[str, Any] = {
        "op": "generate",
        "url": server_url + GRAPHQL_PATH,
        "data": dict(data),
        **options,
    }
    if properties is not None:
        command["properties"] = dict(properties)
    return command


def joined_content(message: Mapping[str, Any]) -> str:
    """The text the client reassembled from a streamed ``content`` (or ``arguments``) list."""
    parts = message.get("content")
    if parts is None:
        parts = message.get("arguments")
    return "".join(parts or [])


def deterministic_tokens(count: int) -> str:
    """What the fake upstream streams for ``{"tokens": count}``: "t0 t1 t2 ..."."""
    return " ".join(f"t{index}" for index in range(count))


def prompt_words(model_request: Mapping[str, Any]) -> int:
    """The fake upstream's ``prompt_tokens``: whitespace-separated words of all contents."""
    words = 0
    for message in model_request["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            words += len(content.split())
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    words += len(part["text"].split())
    return words


def assert_no_traceback(text: str) -> None:
    for marker in TRACEBACK_MARKERS:
        assert marker not in text, f"{marker!r} leaked onto the wire: {text[:2000]}"


def wait_for(
    probe: Callable[[], T | None], *, timeout: float = 10.0, interval: float = 0.05, what: str
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def finished_run(run_id: str, *, timeout: float = 10.0) -> Run:
    """The run once the served process has finished it (status, usage, error committed)."""

    def probe() -> Run | None:
        run = Run.objects.filter(pk=run_id).first()
        return run if run is not None and run.is_finished and run.finished_at else None

    return wait_for(probe, timeout=timeout, what=f"run {run_id} to finish")


def thread_rows(thread_id: str, *, include_superseded: bool = False) -> list[Message]:
    rows = Message.objects.filter(thread__thread_id=thread_id).order_by("position")
    if not include_superseded:
        rows = rows.filter(superseded=False)
    return list(rows)


def run_events(run_id: str) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run_id=run_id).order_by("seq"))


def replayed_text(events: Iterable[RunEvent], message_id: str) -> str:
    """The text a reader of the event log rebuilds for one message from its deltas."""
    return "".join(
        event.payload["delta"]
        for event in events
        if event.type == "text_delta" and event.payload.get("message_id") == message_id
    )


def graphql_error_codes(result: Mapping[str, Any]) -> list[str]:
    """Every ``extensions.code`` the driver saw, on the error itself or its GraphQL errors."""
    codes: list[str] = []
    for error in result.get("errors") or []:
        extensions = error.get("extensions") or {}
        if extensions.get("code"):
            codes.append(extensions["code"])
        for graphql_error in error.get("graphQLErrors") or []:
            code = (graphql_error.get("extensions") or {}).get("code")
            if code:
                codes.append(code)
    return codes
