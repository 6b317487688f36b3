"""Bad requests: answered as formatted GraphQL errors (HTTP 200 at the transport)."""

from __future__ import annotations

from typing import Any

from copilot_runtime.errors import ErrorCode, error_extensions
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.execution import PreparedOperation, prepare_operation
from tests.copilot_runtime.graphql.helpers import collect, document, execute_single, prepare

BAD_REQUEST = error_extensions(ErrorCode.BAD_REQUEST)


def errors_of(query: str, operation_name: str | None = None) -> list[dict[str, Any]]:
    prepared = prepare_operation(query=query, variables=None, operation_name=operation_name)
    assert isinstance(prepared, list), prepared
    return prepared


def test_syntax_error() -> None:
    [error] = errors_of("{ hello")
    assert error["message"].startswith("Syntax Error")
    assert error["locations"] == [{"line": 1, "column": 8}]
    assert error["extensions"] == BAD_REQUEST
    assert "path" not in error


def test_validation_error_keeps_graphql_message() -> None:
    [error] = errors_of("{ hello nope }")
    assert error == {
        "message": "Cannot query field 'nope' on type 'Query'.",
        "locations": [{"line": 1, "column": 9}],
        "extensions": BAD_REQUEST,
    }


def test_camel_cased_acronym_is_not_accepted() -> None:
    # The name strawberry would generate; the contract (and the client) use openaiAssistantAPI.
    query = document("generate_copilot_response").replace(
        "openaiAssistantAPI", "openaiAssistantApi"
    )
    [error] = errors_of(query)
    assert "openaiAssistantApi" in error["message"]


def test_unknown_operation_name() -> None:
    assert errors_of("query A { hello }", "B") == [
        {"message": "Unknown operation named 'B'.", "extensions": BAD_REQUEST}
    ]


def test_several_operations_need_a_name() -> None:
    [error] = errors_of("query A { hello } query B { hello }")
    assert error["message"] == "Must provide operation name if query contains multiple operations."


def test_missing_query() -> None:
    assert errors_of("  ") == [{"message": "Must provide query string.", "extensions": BAD_REQUEST}]


def test_variables_must_be_an_object() -> None:
    prepared = prepare_operation(query="{ hello }", variables=[1], operation_name=None)  # type: ignore[arg-type]
    assert isinstance(prepared, list)
    assert prepared[0]["extensions"] == BAD_REQUEST


async def test_wrong_variable_types(context: RuntimeContext) -> None:
    result = await execute_single(
        context, document("load_agent_state"), {"data": {"threadId": 5}}, "loadAgentState"
    )
    # A request error: no `data` at all, one error per problem.
    assert set(result) == {"errors"}
    messages = sorted(error["message"] for error in result["errors"])
    assert len(messages) == 2
    assert any("agentName" in message for message in messages)
    assert any("threadId" in message and "String" in message for message in messages)
    assert all(error["extensions"] == BAD_REQUEST for error in result["errors"])


async def test_bad_variables_of_an_incremental_operation_give_one_result(
    context: RuntimeContext,
) -> None:
    prepared = prepare(
        document("generate_copilot_response.urql"),
        {
            "data": {
                "frontend": {"actions": []},
                "metadata": {"requestType": "Chat"},
                "messages": [
                    {
                        "id": "u1",
                        "createdAt": "yesterday",
                        "textMessage": {"content": "Hi", "role": "user"},
                    }
                ],
            }
        },
    )
    assert prepared.is_incremental
    result = await prepared.execute(context)
    assert isinstance(result, dict)
    [error] = result["errors"]
    assert "createdAt" in error["message"] and "yesterday" in error["message"]
    assert error["extensions"] == BAD_REQUEST
    assert "data" not in result


def test_documents_are_parsed_once() -> None:
    first = prepare("query Cached { hello }")
    second = prepare("query Cached { hello }")
    assert first.document is second.document


def test_incremental_detection_follows_fragments_and_the_chosen_operation() -> None:
    query = """
        query Plain { hello }
        query Deferred { ...Outer }
        fragment Outer on Query { ...Inner }
        fragment Inner on Query { ... @defer { hello } }
    """
    plain = prepare(query, operation_name="Plain")
    deferred = prepare(query, operation_name="Deferred")
    assert isinstance(plain, PreparedOperation) and not plain.is_incremental
    assert deferred.is_incremental
    assert (plain.operation_type, deferred.operation_type) == ("query", "query")


async def test_defer_on_the_query_root(context: RuntimeContext) -> None:
    result = await prepare("query { ... @defer { hello } }").execute(context)
    assert not isinstance(result, dict)
    assert await collect(result) == [
        {"data": {}, "hasNext": True},
        {"incremental": [{"data": {"hello": "Hello World"}, "path": []}], "hasNext": False},
    ]
