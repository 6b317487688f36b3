"""Content on spans: references to the stored history, shared blobs, the redaction hook."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from conversations.models import Span, Thread, TraceBlob
from copilot_runtime.adapters.base import ModelRequest
from copilot_runtime.conf import DEFAULTS
from copilot_runtime.events import GenerationStart, RunFinished
from copilot_runtime.events.request import InputMessage, TurnRequest
from copilot_runtime.tracing.tracer import RunTracer
from tests.conversations.factories import run_row, thread_create
from tests.copilot_runtime.tracing import fixtures as fx

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEM = "You are a careful assistant. " * 80  # a long prompt, sent with every call
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
CONTENT_ON = {"TRACE_CONTENT": True}


def redact_secrets(value: Any) -> Any:
    """A redaction hook for the tests: every string loses the word 'secret'."""
    if isinstance(value, str):
        return value.replace("secret", "[redacted]")
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
    if isinstance(value, dict):
        return {k: redact_secrets(v) for k, v in value.items()}
    return value


def _turn_request(history: list[InputMessage]) -> TurnRequest:
    return TurnRequest(thread_id="thread-c", messages=list(history))


def _model_request(history: list[InputMessage]) -> ModelRequest:
    entries = [{"role": "system", "content": SYSTEM}]
    entries += [{"role": m.role, "content": m.content} for m in history]
    return ModelRequest(messages=entries, tools=TOOLS)


async def _traced_turn(run_id: str, history: list[InputMessage], answer: str) -> None:
    thread = await _thread()
    await _run(thread, run_id)
    tracer = RunTracer.for_run(
        run_id=run_id, thread_id="thread-c", request=_turn_request(history), model=fx.MODEL
    )
    tracer.observe(GenerationStart(model=fx.MODEL, request=_model_request(history)))
    for event in [*fx.text(f"m-{run_id}", answer), fx.generation_end()]:
        tracer.observe(event)
    tracer.observe(RunFinished(status="succeeded"))
    await tracer.finish()


async def _thread() -> Thread:
    found = await Thread.objects.filter(thread_id="thread-c").afirst()
    return found or await sync_to_async(thread_create)(thread_id="thread-c")


async def _run(thread: Thread, run_id: str) -> None:
    await sync_to_async(run_row)(thread=thread, status="succeeded", run_id=run_id)


async def _stored_bytes() -> int:
    """What the spans and blobs hold of content, in bytes of JSON."""
    total = 0
    async for span in Span.objects.all():
        total += len(orjson.dumps(span.input)) + len(orjson.dumps(span.output))
    async for blob in TraceBlob.objects.all():
        total += len(orjson.dumps(blob.content))
    return total


def test_hosts_keep_no_content_unless_they_enable_it() -> None:
    assert (DEFAULTS["TRACE_CONTENT"], DEFAULTS["TRACE_CONTENT_REDACT"]) == (False, "")


async def test_a_call_refers_to_its_history_and_stores_what_is_new() -> None:
    history = [
        InputMessage(id="u1", kind="text", role="user", content="What is the weather?"),
        InputMessage(id="s1", kind="agent_state", agent_state={"x": 1}),
    ]
    with override_settings(COPILOT_RUNTIME=CONTENT_ON):
        await _traced_turn("run-1", history, "Sunny.")

    call = await Span.objects.aget(run_id="run-1", kind="generation")
    assert call.input["history"] == {"first": "u1", "last": "u1", "count": 1}
    assert call.input["in_run"] == 0
    assert call.output == {"role": "assistant", "content": "Sunny."}
    system = await TraceBlob.objects.aget(sha256=call.input["system"])
    tools = await TraceBlob.objects.aget(sha256=call.input["tools"])
    assert (system.content, tools.content) == ([{"role": "system", "content": SYSTEM}], TOOLS)


async def test_a_long_thread_stores_content_linear_in_its_turns() -> None:
    """Ten turns of a growing thread: each turn stores about what the first did (its answer
    and references), never the history again, and the system prompt and tools once."""
    history: list[InputMessage] = []
    per_turn: list[int] = []
    with override_settings(COPILOT_RUNTIME=CONTENT_ON):
        for turn in range(10):
            history.append(
                InputMessage(id=f"u{turn}", kind="text", role="user", content="question " * 60)
            )
            before = await _stored_bytes()
            await _traced_turn(f"run-{turn}", history, "answer " * 60)
            per_turn.append(await _stored_bytes() - before)
            history.append(
                InputMessage(id=f"a{turn}", kind="text", role="assistant", content="answer " * 60)
            )

    assert await TraceBlob.objects.acount() == 2  # one system prompt, one set of tools
    # The first turn also stored the blobs; every later turn stores a bounded amount.
    later = per_turn[1:]
    assert max(later) - min(later) < 16, per_turn  # ids grow a digit at most
    assert sum(per_turn) < per_turn[0] + 9 * (later[0] + 16)
    history_bytes = sum(len(m.content) for m in history)
    assert max(later) < history_bytes / 4  # a copy of the history would be all of it


async def test_the_redaction_hook_runs_before_anything_is_stored() -> None:
    history = [InputMessage(id="u1", kind="text", role="user", content="my secret plan")]
    hook = f"{__name__}.redact_secrets"
    with override_settings(COPILOT_RUNTIME={**CONTENT_ON, "TRACE_CONTENT_REDACT": hook}):
        thread = await _thread()
        await _run(thread, "run-r")
        tracer = RunTracer.for_run(
            run_id="run-r", thread_id="thread-c", request=_turn_request(history), model=fx.MODEL
        )
    request = ModelRequest(
        messages=[{"role": "system", "content": "the secret word is x"}], tools=TOOLS
    )
    for event in [
        GenerationStart(model=fx.MODEL, request=request),
        *fx.text("m1", "the secret ", "is out"),
        *fx.tool_call("c1", "weather", '{"where": "secret base"}'),
        fx.generation_end("tool_calls"),
        fx.result("c1", "weather", '{"at": "secret base", "sky": "clear"}'),
        RunFinished(status="succeeded"),
    ]:
        tracer.observe(event)
    await tracer.finish()

    stored = [
        orjson.dumps([s.input, s.output]).decode()
        async for s in Span.objects.filter(run_id="run-r")
    ]
    stored += [orjson.dumps(b.content).decode() async for b in TraceBlob.objects.all()]
    assert not [text for text in stored if "secret" in text]
    tool = await Span.objects.aget(run_id="run-r", kind="tool")
    assert (tool.input, tool.output) == (
        {"where": "[redacted] base"},
        {"at": "[redacted] base", "sky": "clear"},
    )
    call = await Span.objects.aget(run_id="run-r", kind="generation")
    assert call.output["content"] == "the [redacted] is out"
