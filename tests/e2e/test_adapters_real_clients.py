"""Every model adapter end to end, set by settings alone: the served runtime on Anthropic's
Messages API, Azure OpenAI's deployment URL, and a LangChain chat model (langchain-openai),
all on the fake upstream; the real v1 client and the real v2 core stream a reply and a
frontend tool call through each, and the run's usage, spans and cost are recorded."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Run, RunStatus, Span
from copilot_runtime.models import ModelPrice
from copilot_runtime.tracing import semconv as attr
from tests.e2e.agui_client import run_agui
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    finished_run,
    generate_command,
    generate_data,
    joined_content,
    server_env,
    text_input,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

SAY_HELLO = {
    "name": "sayHello",
    "description": "Say hello to someone in the browser.",
    "properties": {"name": "string"},
    "result": "Hello said to Bob",
}


def adapter_setting(kind: str, fake_base_url: str) -> tuple[dict[str, Any], str, str]:
    """(ADAPTER, the model the run records, the provider name on its spans)."""
    root = fake_base_url.removesuffix("/v1")
    if kind == "anthropic":
        return (
            {
                "kind": "anthropic",
                "api_key": "sk-ant",
                "base_url": root,
                "model": "claude-test",
                "max_retries": 0,
            },
            "claude-test",
            "anthropic",
        )
    if kind == "azure":
        return (
            {
                "kind": "azure",
                "api_key": "azure-key",
                "endpoint": root,
                "deployment": "gpt4o-prod",
                "api_version": "2024-10-21",
                "max_retries": 0,
            },
            "gpt4o-prod",
            "azure",
        )
    return (
        {
            "kind": "langchain",
            "factory": "tests.support.langchain_models.fake_chat_openai",
            "options": {"base_url": fake_base_url, "model": "gpt-lc"},
        },
        "gpt-lc",
        "langchain",
    )


@pytest.mark.parametrize("kind", ["anthropic", "azure", "langchain"])
def test_an_adapter_set_by_settings_serves_both_clients_and_is_costed(
    live_server_factory: Any, fake_upstream: FakeUpstream, kind: str
) -> None:
    adapter, model, provider = adapter_setting(kind, fake_upstream.base_url)
    ModelPrice.objects.create(
        model=model, input_per_million=Decimal("1"), output_per_million=Decimal("2")
    )
    server = live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_ADAPTER=json.dumps(adapter))
    )

    # v1: a streamed text reply.
    v1_thread = f"adapter-v1-{kind}-{uuid.uuid4()}"
    data = generate_data(
        thread_id=v1_thread, messages=[text_input("u1", 'FAKE: {"text": "Hello over v1"}')]
    )
    v1 = run_js(JS_CLIENT_VERSIONS[0], generate_command(server.url, data))
    assert v1["errors"] == []
    [reply] = [m for m in v1["final"]["messages"] if m["__typename"] == "TextMessageOutput"]
    assert joined_content(reply) == "Hello over v1"

    # v2: a frontend tool call the client runs, then the follow-up run's answer.
    fake_upstream.script(
        {"tool_calls": [{"name": "sayHello", "arguments": {"name": "Bob"}}]},
        {"text": "Bob was greeted"},
    )
    v2 = run_agui(
        {
            "runtimeUrl": f"{server.url}/api/copilotkit",
            "agentId": "default",
            "threadId": f"adapter-v2-{kind}-{uuid.uuid4()}",
            "tools": [SAY_HELLO],
            "steps": [{"op": "run", "message": {"id": "u1", "content": "Greet Bob"}}],
        }
    )
    assert v2["errors"] == []
    assert v2["toolCalls"] == [{"name": "sayHello", "args": {"name": "Bob"}}]
    assert [
        m.get("content") for m in v2["messages"] if m["role"] == "assistant" and m.get("content")
    ] == ["Bob was greeted"]

    # Usage, spans and cost, for every adapter alike.
    run = finished_run(v1["final"]["runId"])
    assert run.status == RunStatus.SUCCEEDED
    assert run.model == model
    assert run.input_tokens > 0 and run.output_tokens == 3
    root = wait_for(
        lambda: Span.objects.filter(run_id=run.pk, kind="run").first(), what="the run's span"
    )
    assert root.attributes[attr.PROVIDER_NAME] == provider
    run.refresh_from_db()
    expected = (run.input_tokens * Decimal("1") + run.output_tokens * Decimal("2")) / 10**6
    assert run.cost is not None and abs(run.cost - expected) < Decimal("1e-9")
    finished = [r for r in Run.objects.filter(thread__thread_id__startswith=f"adapter-v2-{kind}")]
    assert all(r.output_tokens > 0 for r in finished)
