"""A model call's prompt rebuilt from its span's references, and span attributes as rows."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from conversations.admin.call_content import attribute_rows, call_prompts
from conversations.models import Run, Span, Thread, TraceBlob
from tests.conversations.factories import message_row, run_row, thread_create

pytestmark = pytest.mark.django_db

SYSTEM = [{"role": "system", "content": "Be brief."}]
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]


def _span(run: Run, span_id: str, kind: str, **fields: Any) -> Span:
    return Span.objects.create(
        trace_id="c" * 32,
        span_id=span_id,
        run=run,
        kind=kind,
        name=kind,
        started_at=timezone.now(),
        **fields,
    )


@pytest.fixture
def thread() -> Thread:
    thread = thread_create(thread_id="content")
    message_row(thread=thread, position=0, message_id="u1", role="user", content="First?")
    message_row(thread=thread, position=1, message_id="a1", role="assistant", content="Old.")
    message_row(thread=thread, position=2, message_id="s1", kind="agent_state")
    message_row(
        thread=thread, position=3, message_id="x1", role="assistant", content="Set aside.",
        superseded=True,
    )  # fmt: skip
    message_row(thread=thread, position=4, message_id="u2", role="user", content="Second?")
    TraceBlob.objects.create(sha256="s" * 64, content=SYSTEM, last_used_at=timezone.now())
    TraceBlob.objects.create(sha256="t" * 64, content=TOOLS, last_used_at=timezone.now())
    return thread


def _calls(thread: Thread, history: dict[str, Any], system: str = "s" * 64) -> list[Span]:
    run = run_row(thread=thread, status="succeeded")
    first = _span(
        run,
        "g1",
        "generation",
        input={"history": history, "in_run": 0, "system": system, "tools": "t" * 64},
        output={
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"q": "x"}}],
        },
    )
    tool = _span(run, "t1", "tool", attributes={"gen_ai.tool.call.id": "c1"}, output={"n": 1})
    second = _span(
        run,
        "g2",
        "generation",
        input={"history": history, "in_run": 2, "system": system, "tools": "t" * 64},
        output={"role": "assistant", "content": "Done."},
    )
    return [first, tool, second]


def test_the_whole_prompt_comes_back_from_the_references(thread: Thread) -> None:
    spans = _calls(thread, {"first": "u1", "last": "u2", "count": 3})

    prompts = call_prompts(thread_pk=thread.pk, spans=spans)

    second = prompts["g2"]
    assert [(e.source, e.role, e.text) for e in second.entries[:6]] == [
        ("system", "system", "Be brief."),
        ("history", "user", "First?"),
        ("history", "assistant", "Old."),
        ("history", "user", "Second?"),  # the agent state and the set-aside row left out
        ("run", "assistant", 'calls lookup({\n  "q": "x"\n})'),
        ("run", "tool", '{\n  "n": 1\n}'),
    ]
    assert second.entries[-1].role == "tools (lookup)" and second.note == ""
    assert [e.source for e in prompts["g1"].entries] == [
        "system",
        "history",
        "history",
        "history",
        "tools",
    ]


def test_what_is_gone_is_said(thread: Thread) -> None:
    spans = _calls(thread, {"first": "u1", "last": "gone", "count": 2}, system="x" * 64)

    prompt = call_prompts(thread_pk=thread.pk, spans=spans)["g1"]

    assert "system prompt is no longer stored" in prompt.note
    assert "2 stored message(s) this call was sent are no longer stored" in prompt.note


def test_attributes_read_as_rows() -> None:
    rows = attribute_rows(
        {
            "gen_ai.usage.cost": 3.15e-06,
            "gen_ai.response.finish_reasons": ["stop"],
            "copilot.resumed": True,
            "copilot.detail": {"a": 1},
            "long": "x" * 400,
        }
    )

    assert rows[:4] == [
        ("copilot.detail", '{\n  "a": 1\n}'),
        ("copilot.resumed", "true"),
        ("gen_ai.response.finish_reasons", "stop"),
        ("gen_ai.usage.cost", "0.00000315"),
    ]
    assert rows[4][1].endswith("…") and len(rows[4][1]) == 301
