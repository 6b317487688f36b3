"""A document other than the client's goes through the general executor with a real run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.db import connections
from django.test import override_settings

from conversations.models import Message, Run, RunStatus
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.execution import prepare_operation
from copilot_runtime.graphql.fastpath import match_fast_operation
from tests.copilot_runtime.graphql.helpers import collect, urql_merge

pytestmark = pytest.mark.django_db(transaction=True)

# Fewer fields than the client asks for, and no __typename: not the fast path.
DOCUMENT = """
mutation Generate($data: GenerateCopilotResponseInput!) {
  generateCopilotResponse(data: $data) {
    threadId
    runId
    ... on CopilotResponse @defer { status { ... on BaseResponseStatus { code } } }
    messages @stream {
      ... on TextMessageOutput { id content @stream role }
      ... on ActionExecutionMessageOutput { id name arguments @stream }
      ... on ResultMessageOutput { id result actionName }
    }
  }
}
"""


@pytest.fixture
def runtime_on_fake(fake_upstream) -> Iterator[None]:
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "ACTIONS": ["tests.support.actions.server_add"],
        }
    ):
        yield


def _variables(text: str, thread_id: str) -> dict:
    return {
        "data": {
            "threadId": thread_id,
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": "u1",
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {"content": text, "role": "user"},
                }
            ],
            "metadata": {"requestType": "Chat"},
        }
    }


async def test_the_general_executor_streams_a_real_turn(runtime_on_fake) -> None:
    directive = (
        'FAKE: {"steps": [{"tool_calls": [{"name": "serverAdd", "arguments": {"a": 2, "b": 3}}]},'
        ' {"text": "Five it is"}]}'
    )
    prepared = prepare_operation(
        query=DOCUMENT, variables=_variables(directive, "general-1"), operation_name=None
    )
    assert not isinstance(prepared, list)
    assert match_fast_operation(prepared) is None

    stream = await prepared.execute(RuntimeContext(request=None, user=AnonymousUser()))
    assert not isinstance(stream, dict)
    payloads = await collect(stream)
    merged = urql_merge(payloads)
    assert not merged["errors"]
    result = merged["data"]["generateCopilotResponse"]

    assert result["threadId"] == "general-1"
    run = await Run.objects.aget(pk=result["runId"])
    assert result["status"] == {"code": "Success"}, (run.error_code, run.error_details)
    call, outcome, text = result["messages"]
    assert call["name"] == "serverAdd"
    assert "".join(call["arguments"]) == '{"a":2,"b":3}'
    assert outcome["result"] == '{"sum":5}'
    assert "".join(text["content"]) == "Five it is"

    run = await Run.objects.aget(pk=result["runId"])
    for _ in range(50):  # the run finishes its bookkeeping right after the last event
        if run.status != RunStatus.RUNNING:
            break
        await run.arefresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    stored = [m.kind async for m in Message.objects.filter(run=run).order_by("position")]
    assert stored == ["text", "action_execution", "result", "text"]
    await sync_to_async(connections.close_all)()


async def test_an_upstream_error_fails_the_deferred_status(runtime_on_fake) -> None:
    prepared = prepare_operation(
        query=DOCUMENT,
        variables=_variables('FAKE: {"error": {"status": 500, "message": "no"}}', "general-2"),
        operation_name=None,
    )
    assert not isinstance(prepared, list)
    stream = await prepared.execute(RuntimeContext(request=None, user=AnonymousUser()))
    result = urql_merge(await collect(stream))["data"]["generateCopilotResponse"]
    assert result["status"] == {"code": "Failed"}
    assert result["messages"] == []
    await sync_to_async(connections.close_all)()
