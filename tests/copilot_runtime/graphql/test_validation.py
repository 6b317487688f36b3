"""The runtime's own validation rules: one turn per operation, bounded query text."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from benchmarks.client_request import request_variables
from conversations.models import Run
from copilot_runtime.errors import ErrorCode, error_extensions
from copilot_runtime.graphql import execution
from copilot_runtime.graphql.execution import MAX_QUERY_CHARS, PreparedOperation, prepare_operation
from copilot_runtime.graphql.validation import one_turn_message
from tests.support.asgi_call import call

BAD_REQUEST = error_extensions(ErrorCode.BAD_REQUEST)
TURN = "generateCopilotResponse(data: $data) { threadId runId }"
HEADER = "mutation M($data: GenerateCopilotResponseInput!)"


def _errors(query: str) -> list[dict[str, Any]]:
    prepared = prepare_operation(query=query, variables=None, operation_name=None)
    assert isinstance(prepared, list), "the document was accepted"
    return prepared


def test_aliases_of_the_turn_field_are_refused() -> None:
    aliases = " ".join(f"a{i}: {TURN}" for i in range(100))

    [error] = _errors(f"{HEADER} {{ {aliases} }}")

    assert error["message"] == one_turn_message(100)
    assert error["extensions"] == BAD_REQUEST


def test_turn_fields_hidden_in_fragments_are_counted() -> None:
    query = (
        f"{HEADER} {{ ...F ... on Mutation {{ b: {TURN} }} }} "
        f"fragment F on Mutation {{ a: {TURN} }}"
    )

    [error] = _errors(query)

    assert error["message"] == one_turn_message(2)


async def test_strawberrys_own_execution_applies_the_rule_to_every_operation() -> None:
    # The websocket's operations run through strawberry's schema, whose extensions are built
    # for each operation: the rule holds for the second operation as for the first.
    from copilot_runtime.graphql.schema import schema

    document = f"{HEADER} {{ a: {TURN} b: {TURN} }}"
    for _ in range(2):
        result = await schema.execute(document, variable_values={"data": {}})
        assert result.data is None
        assert [error.message for error in result.errors or []] == [one_turn_message(2)]


def test_one_turn_beside_other_fields_is_accepted() -> None:
    query = f'{HEADER} {{ {TURN} stopRun(runId: "r") }}'

    assert isinstance(
        prepare_operation(query=query, variables=None, operation_name=None), PreparedOperation
    )


def test_a_query_longer_than_the_limit_is_refused_before_parsing() -> None:
    before = execution._parse_and_validate.cache_info().currsize
    padding = "#" + "x" * MAX_QUERY_CHARS + "\n"

    [error] = _errors(padding + "{ hello }")

    assert "too long" in error["message"]
    assert error["extensions"] == BAD_REQUEST
    assert execution._parse_and_validate.cache_info().currsize == before


@pytest.mark.django_db(transaction=True)
async def test_an_aliased_mutation_over_http_starts_no_run(
    fake_upstream: Any, settings: Any
) -> None:
    settings.COPILOT_RUNTIME = {"OPENAI_API_KEY": "t", "OPENAI_BASE_URL": fake_upstream.base_url}
    aliases = " ".join(f"a{i}: {TURN}" for i in range(20))
    variables = request_variables(thread_id=None, tokens=3)  # type: ignore[arg-type]
    body = orjson.dumps({"query": f"{HEADER} {{ {aliases} }}", "variables": variables})

    reply = await call("/api/copilotkit", body, headers={"accept": "application/json"})

    assert reply.status == 200
    assert reply.json()["errors"][0]["message"] == one_turn_message(20)
    assert await Run.objects.acount() == 0
    assert fake_upstream.requests() == []
