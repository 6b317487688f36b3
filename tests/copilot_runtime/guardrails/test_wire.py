"""A denial on the v1 wire: the fast path's encoder and the general GraphQL executor."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import Run
from copilot_runtime.agui.translate import Translator
from copilot_runtime.events import (
    GuardrailDecision,
    RunError,
    RunFinished,
    TextDelta,
    TextStart,
)
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.execution import prepare_operation
from copilot_runtime.graphql.fastpath import match_fast_operation
from copilot_runtime.graphql.fastpath.encoder import V1Encoder
from copilot_runtime.graphql.v1_rules import failed_response_status
from copilot_runtime.guardrails import gate
from copilot_runtime.guardrails.errors import denial_error
from copilot_runtime.guardrails.rules import RuleSpec, Subject
from copilot_runtime.guardrails.verdicts import Finding
from copilot_runtime.models import GuardrailRule
from tests.copilot_runtime.graphql.helpers import collect, urql_merge

REASON = "Topic not allowed"
INTERRUPTED = {
    "code": "Failed",
    "reason": "Interrupted due to Guardrails validation failure. Reason: Topic not allowed",
    "__typename": "FailedMessageStatus",
}
DENIED_STATUS = {
    "code": "Failed",
    "__typename": "FailedResponseStatus",
    "reason": "GUARDRAILS_VALIDATION_FAILED",
    "details": {"guardrailsReason": REASON},
}


def test_the_denial_is_the_typescript_runtimes_failed_response_status() -> None:
    assert failed_response_status(denial_error(REASON)) == DENIED_STATUS


def test_the_encoder_fails_the_response_and_interrupts_the_open_message() -> None:
    encoder = V1Encoder()
    encoder.encode([TextStart(message_id="m"), TextDelta(message_id="m", delta="Partial")])

    entries, done = encoder.encode([denial_error(REASON), RunFinished(status="failed")])

    assert done
    assert entries == [
        {
            "data": {"status": DENIED_STATUS, "__typename": "CopilotResponse"},
            "path": ["generateCopilotResponse"],
        },
        {
            "data": {"status": INTERRUPTED, "__typename": "TextMessageOutput"},
            "path": ["generateCopilotResponse", "messages", 0],
        },
    ]


def test_other_errors_keep_their_mapping() -> None:
    status = failed_response_status(RunError(message="boom", code="UPSTREAM_SERVER_ERROR"))

    assert status["reason"] == "UNKNOWN_ERROR"


# --- the general executor -----------------------------------------------------------------------

DOCUMENT = """
mutation Generate($data: GenerateCopilotResponseInput!) {
  generateCopilotResponse(data: $data) {
    threadId
    runId
    ... on CopilotResponse @defer {
      status {
        ... on BaseResponseStatus { code }
        ... on FailedResponseStatus { reason details }
      }
    }
    messages @stream {
      ... on TextMessageOutput {
        id
        content @stream
        ... on TextMessageOutput @defer {
          status { ... on FailedMessageStatus { code reason } }
        }
      }
    }
  }
}
"""


@pytest.fixture
def runtime_on_fake(fake_upstream: Any) -> Iterator[None]:
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "GUARDRAILS_MODE": "parallel",
            "GUARDRAILS_EVALUATOR": "model",
        }
    ):
        yield


class DenyAfterFirstTokens:
    """Denies once the turn has streamed a few tokens (the fake's request was seen)."""

    name = "model"

    def __init__(self, fake_upstream: Any) -> None:
        self._fake = fake_upstream

    async def evaluate(self, subject: Subject, rules: Sequence[RuleSpec]) -> Finding:
        for _ in range(500):
            if self._fake.requests():
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.15)
        return Finding(evaluator="model", rules=list(rules), vetoed=True, reason=REASON)


@pytest.mark.django_db(transaction=True)
async def test_the_general_executor_maps_a_parallel_denial_the_same_way(
    runtime_on_fake: None, fake_upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the end user is told is the rule's own text (its name stays in the run's log).
    await GuardrailRule.objects.acreate(
        name="politics", kind="deny", match="topic", text="politics", denial_text=REASON
    )
    monkeypatch.setattr(gate, "topic_evaluator", lambda *args: DenyAfterFirstTokens(fake_upstream))
    fake_upstream.script({"tokens": 300, "delay_ms": 10})
    variables = {
        "data": {
            "threadId": "general-guard",
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": "u1",
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {"content": "politics", "role": "user"},
                }
            ],
            "metadata": {"requestType": "Chat"},
        }
    }
    prepared = prepare_operation(query=DOCUMENT, variables=variables, operation_name=None)
    assert not isinstance(prepared, list)
    assert match_fast_operation(prepared) is None

    stream = await prepared.execute(RuntimeContext(request=None, user=AnonymousUser()))
    assert not isinstance(stream, dict)
    merged = urql_merge(await collect(stream))

    assert not merged["errors"]
    result = merged["data"]["generateCopilotResponse"]
    assert result["status"] == {
        "code": "Failed",
        "reason": "GUARDRAILS_VALIDATION_FAILED",
        "details": {"guardrailsReason": REASON},
    }
    (message,) = result["messages"]
    assert "".join(message["content"]).startswith("t0")
    assert message["status"] == {"code": "Failed", "reason": INTERRUPTED["reason"]}
    run = await Run.objects.aget(pk=result["runId"])
    for _ in range(100):
        if run.is_finished:
            break
        await asyncio.sleep(0.02)
        await run.arefresh_from_db()
    assert run.error_code == "GUARDRAILS_VALIDATION_FAILED"


def test_on_ag_ui_the_denial_is_a_run_error_with_the_reason_as_its_message() -> None:
    translator = Translator(thread_id="t", run_id="r")
    translator.translate(TextStart(message_id="m"))

    decision = translator.translate(GuardrailDecision(denied=True, reason=REASON))
    ended = translator.translate(denial_error(REASON))

    assert decision == []  # the decision itself is for the log and the trace, not the client
    assert ended == [
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {
            "type": "RUN_ERROR",
            "message": REASON,
            "code": "GUARDRAILS_VALIDATION_FAILED",
            "threadId": "t",
            "runId": "r",
        },
    ]
