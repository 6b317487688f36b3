"""Any LangChain chat model as the runtime's model: langchain-openai on the fake upstream."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from copilot_runtime.adapters.base import (
    FinishChunk,
    ModelRequest,
    ReasoningChunk,
    ReasoningSealChunk,
    TextChunk,
    ToolCallChunk,
    UpstreamError,
    UsageChunk,
)
from copilot_runtime.adapters.kinds import AdapterSettingError, adapter_build
from copilot_runtime.events.reasoning import THINKING_BLOCKS
from tests.support.langchain_models import RECORDED

FACTORY = "tests.support.langchain_models.fake_chat_openai"
LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look an order up.",
        "parameters": {"type": "object", "properties": {"order": {"type": "string"}}},
    },
}


def adapter_on(fake_upstream: Any) -> Any:
    return adapter_build(
        {"kind": "langchain", "factory": FACTORY, "options": {"base_url": fake_upstream.base_url}}
    )


async def chunks_of(adapter: Any, request: ModelRequest) -> list[Any]:
    return [chunk async for chunk in adapter.stream(request)]


async def test_text_usage_and_finish_reason_stream_through(fake_upstream: Any) -> None:
    adapter = adapter_on(fake_upstream)
    fake_upstream.script({"text": "Hello from LangChain"})

    chunks = await chunks_of(
        adapter,
        ModelRequest(
            messages=[{"role": "system", "content": "Brief."}, {"role": "user", "content": "Hi"}]
        ),
    )

    assert "".join(c.delta for c in chunks if isinstance(c, TextChunk)) == "Hello from LangChain"
    [finish] = [c for c in chunks if isinstance(c, FinishChunk)]
    assert finish.reason == "stop"
    [usage] = [c for c in chunks if isinstance(c, UsageChunk)]
    assert usage.output_tokens == 3 and usage.input_tokens > 0
    assert adapter.default_model == "gpt-4o-mini"
    assert adapter.provider == "langchain.openai-chat"
    sent = fake_upstream.requests()[-1]["messages"]
    assert sent == [{"role": "system", "content": "Brief."}, {"role": "user", "content": "Hi"}]


async def test_parallel_tool_calls_and_tool_results_round_trip(fake_upstream: Any) -> None:
    adapter = adapter_on(fake_upstream)
    fake_upstream.script(
        {
            "tool_calls": [
                {"name": "lookup", "arguments": {"order": "A1"}, "id": "c1"},
                {"name": "lookup", "arguments": {"order": "B2"}, "id": "c2"},
            ]
        }
    )

    chunks = await chunks_of(
        adapter, ModelRequest(messages=[{"role": "user", "content": "Find"}], tools=[LOOKUP])
    )

    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if isinstance(chunk, ToolCallChunk):
            entry = calls.setdefault(chunk.index, {"id": None, "name": None, "args": ""})
            entry["id"] = entry["id"] or chunk.id
            entry["name"] = entry["name"] or chunk.name
            entry["args"] += chunk.arguments_delta
    assert [(c["id"], c["name"], c["args"]) for c in calls.values()] == [
        ("c1", "lookup", '{"order":"A1"}'),
        ("c2", "lookup", '{"order":"B2"}'),
    ]
    assert [c.reason for c in chunks if isinstance(c, FinishChunk)] == ["tool_calls"]
    assert fake_upstream.requests()[-1]["tools"][0]["function"]["name"] == "lookup"

    # The results go back as tool messages of the same calls.
    fake_upstream.script({"text": "Both found"})
    history = [
        {"role": "user", "content": "Find"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
    ]
    await chunks_of(adapter, ModelRequest(messages=history, tools=[LOOKUP]))
    sent = fake_upstream.requests()[-1]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "c1"
    assert sent[2] == {"role": "tool", "tool_call_id": "c1", "content": "shipped"}


async def test_a_provider_failure_becomes_the_runtimes_upstream_code(fake_upstream: Any) -> None:
    adapter = adapter_on(fake_upstream)
    fake_upstream.script({"error": {"status": 429, "message": "slow down"}})

    with pytest.raises(UpstreamError) as raised:
        await chunks_of(adapter, ModelRequest(messages=[{"role": "user", "content": "Hi"}]))

    assert raised.value.code == "UPSTREAM_RATE_LIMITED"
    assert raised.value.status_code == 429


def test_a_factory_that_does_not_give_a_chat_model_is_refused() -> None:
    with pytest.raises(AdapterSettingError, match="does not import"):
        adapter_build({"kind": "langchain", "factory": "tests.support.nowhere.model"})
    with pytest.raises(AdapterSettingError, match="not a LangChain chat model"):
        adapter_build(
            {"kind": "langchain", "factory": "tests.support.langchain_models.not_a_model"}
        )


async def test_reasoning_in_each_form_langchain_gives_it_streams_before_the_text() -> None:
    adapter = adapter_build(
        {"kind": "langchain", "factory": "tests.support.langchain_models.scripted_reasoning_model"}
    )
    # An assistant message carrying Anthropic's blocks does not trouble LangChain.
    history = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello", THINKING_BLOCKS: [{"type": "thinking"}]},
        {"role": "user", "content": "Count"},
    ]
    chunks = await chunks_of(adapter, ModelRequest(messages=history))

    reasoning = [c.delta for c in chunks if isinstance(c, ReasoningChunk)]
    assert reasoning == ["One, ", "two, ", "three."]
    kinds = [type(c) for c in chunks]
    assert kinds.index(TextChunk) > max(i for i, k in enumerate(kinds) if k is ReasoningChunk)
    assert "".join(c.delta for c in chunks if isinstance(c, TextChunk)) == "Done"


async def test_url_images_and_documents_reach_the_model_and_text_documents_are_inlined(
    fake_upstream: Any,
) -> None:
    adapter = adapter_on(fake_upstream)
    fake_upstream.script({"text": "Seen."})
    pdf = "data:application/pdf;base64,JVBERi0xLjQ="
    notes = "data:text/plain;base64," + base64.b64encode(b"Buy milk.").decode()
    parts = [
        {"type": "text", "text": "Look at these."},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": pdf}},
        {"type": "file", "file": {"filename": "notes.txt", "file_data": notes}},
    ]

    chunks = await chunks_of(adapter, ModelRequest(messages=[{"role": "user", "content": parts}]))

    assert "".join(c.delta for c in chunks if isinstance(c, TextChunk)) == "Seen."
    [sent] = fake_upstream.requests()[-1]["messages"]
    assert sent["content"] == [
        {"type": "text", "text": "Look at these."},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": pdf}},
        {"type": "text", "text": "File notes.txt:\nBuy milk."},
    ]


async def test_an_anthropic_models_signed_thinking_is_sealed_and_goes_back_as_content() -> None:
    adapter = adapter_build(
        {"kind": "langchain", "factory": "tests.support.langchain_models.recording_anthropic_model"}
    )
    thinking = {"type": "thinking", "thinking": "Earlier plan.", "signature": "OLD"}
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "Hi"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [call],
            THINKING_BLOCKS: [thinking],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]
    RECORDED.clear()

    chunks = await chunks_of(adapter, ModelRequest(messages=history))

    seals = [c for c in chunks if isinstance(c, ReasoningSealChunk)]
    assert seals == [ReasoningSealChunk(signature="SIG"), ReasoningSealChunk(redacted="ENC")]
    kinds = [type(c) for c in chunks]
    assert kinds.index(ReasoningChunk) < kinds.index(ReasoningSealChunk) < kinds.index(TextChunk)
    [usage] = [c for c in chunks if isinstance(c, UsageChunk)]
    assert usage == UsageChunk(
        input_tokens=30, output_tokens=5, cached_input_tokens=10, cache_write_input_tokens=8
    )
    [sent] = RECORDED
    assistant = sent[1]
    assert assistant.content == [thinking, {"type": "text", "text": "Looking."}]
    assert [c["id"] for c in assistant.tool_calls] == ["c1"]
