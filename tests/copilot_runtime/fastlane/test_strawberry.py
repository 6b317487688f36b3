"""graphql-core's schema behind strawberry's (copilot_runtime/fastlane/strawberry.py): strawberry's
own with the lane open; with it closed, one built through strawberry's public API that prints,
validates, executes (``@defer``/``@stream`` over HTTP) and coerces as strawberry's does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
import strawberry
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.test import AsyncClient, override_settings
from graphql import GraphQLSchema, execute, parse, print_schema, validate_schema
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.schema_directive import Location

from copilot_runtime import fastlane
from copilot_runtime.fastlane import lane_open
from copilot_runtime.fastlane.strawberry import graphql_core_schema
from copilot_runtime.graphql import execution, fastpath
from copilot_runtime.graphql.fastpath.documents import client_mutation_printed
from copilot_runtime.graphql.schema import schema
from tests.copilot_runtime.graphql.helpers import urql_merge
from tests.support.generate_e2e import runtime_settings

STRAWBERRY = "strawberry-graphql"
UNTESTED_VERSION = "0.0.1"


def _close_by_version(monkeypatch: pytest.MonkeyPatch) -> None:
    real = fastlane.installed_version

    def installed_version(distribution: str) -> str | None:
        return UNTESTED_VERSION if distribution == STRAWBERRY else real(distribution)

    # lane_open looks the name up in the package's namespace at each call.
    monkeypatch.setattr(fastlane, "installed_version", installed_version)


@pytest.fixture(params=["untested version", "switched off"])
def lane_closed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    assert lane_open(STRAWBERRY), "the suite runs with a tested strawberry-graphql"
    if request.param == "untested version":
        _close_by_version(monkeypatch)
        assert not lane_open(STRAWBERRY)
        yield
        return
    # Only the switch: the settings the tests run with otherwise stay.
    configured = getattr(settings, "COPILOT_RUNTIME", None) or {}
    with override_settings(COPILOT_RUNTIME={**configured, "FAST_LANE": False}):
        assert not lane_open(STRAWBERRY)
        yield


@pytest.fixture
def fresh_validation() -> Iterator[None]:
    # Documents are validated once per text: validate again with the schema of this test.
    execution._parse_and_validate.cache_clear()
    yield
    execution._parse_and_validate.cache_clear()


# --- the schema -------------------------------------------------------------------------------


def test_the_open_lane_gives_strawberrys_own_schema() -> None:
    assert lane_open(STRAWBERRY)
    assert graphql_core_schema(schema) is schema._schema


def test_the_closed_lane_builds_the_same_schema(lane_closed: None) -> None:
    built = graphql_core_schema(schema)
    own = schema._schema
    assert built is not own
    assert graphql_core_schema(schema) is built  # built once
    assert print_schema(built) == print_schema(own)
    assert validate_schema(built) == []
    # The same types, in the same order, as the very objects strawberry converted (their
    # resolvers with them), and the same directives.
    assert list(built.type_map) == list(own.type_map)
    assert all(built.type_map[name] is own.type_map[name] for name in own.type_map)
    assert [d.name for d in built.directives] == [d.name for d in own.directives]
    assert {"defer", "stream"} <= {d.name for d in built.directives}
    assert built.extensions == {GraphQLCoreConverter.DEFINITION_BACKREF: schema}


def test_the_closing_follows_the_settings() -> None:
    with override_settings(COPILOT_RUNTIME={"FAST_LANE": False}):
        built = graphql_core_schema(schema)
        assert built is not schema._schema
    assert graphql_core_schema(schema) is schema._schema


@strawberry.type
class _SchemaQuery:
    @strawberry.field
    def schema_is_ours(self, info: strawberry.Info) -> bool:
        return info.schema is _small_schema

    @strawberry.field
    def zebra(self) -> int:
        return 1

    @strawberry.field
    def apple(self) -> int:
        return 2


_small_schema = strawberry.Schema(query=_SchemaQuery)


def test_resolvers_reach_strawberrys_schema_through_info(lane_closed: None) -> None:
    built = graphql_core_schema(_small_schema)
    assert built is not _small_schema._schema
    result = execute(built, parse("{ schemaIsOurs zebra apple }"))
    assert result.errors is None
    assert result.data == {"schemaIsOurs": True, "zebra": 1, "apple": 2}


def test_a_sorted_schema_is_built_sorted(lane_closed: None) -> None:
    sorted_schema = strawberry.Schema(query=_SchemaQuery, config=StrawberryConfig(sort_schema=True))
    built = graphql_core_schema(sorted_schema)
    assert print_schema(built) == print_schema(sorted_schema._schema)
    assert list(built.query_type.fields) == ["apple", "schemaIsOurs", "zebra"]


@strawberry.schema_directive(locations=[Location.OBJECT])
class _Tagged:
    name: str


@strawberry.type(directives=[_Tagged(name="t")])
class _TaggedQuery:
    answer: int = 42


def test_what_the_public_api_cannot_give_is_refused(lane_closed: None) -> None:
    tagged_schema = strawberry.Schema(query=_TaggedQuery)
    with pytest.raises(ImproperlyConfigured, match="@tagged"):
        graphql_core_schema(tagged_schema)


# --- a v1 turn over HTTP ----------------------------------------------------------------------

# Not the client's document: the general executor validates and runs it on the schema.
GENERAL_DOCUMENT = """
mutation Generate($data: GenerateCopilotResponseInput!) {
  generateCopilotResponse(data: $data) {
    threadId
    runId
    ... on CopilotResponse @defer { status { ... on BaseResponseStatus { code } } }
    messages @stream {
      __typename
      ... on BaseMessageOutput { id }
      ... on TextMessageOutput { content @stream role }
      ... on ActionExecutionMessageOutput { name arguments @stream }
      ... on ResultMessageOutput { result actionName actionExecutionId }
    }
  }
}
"""

TOOL_THEN_TEXT = (
    'FAKE: {"steps": [{"tool_calls": [{"name": "serverAdd", "arguments": {"a": 2, "b": 3}}]},'
    ' {"text": "Five it is"}]}'
)
ACCEPT = (
    "application/graphql-response+json, application/graphql+json, application/json, "
    "text/event-stream, multipart/mixed"
)
# Made afresh by each turn: compared by which is which, not by value.
FRESH_IDS = frozenset({"threadId", "runId", "id", "parentMessageId", "actionExecutionId"})
# Times of the turn: not compared (two messages may or may not share a millisecond).
TIMES = frozenset({"createdAt"})
# Streamed text, compared whole: how it is cut into items depends on when the tokens arrive.
STREAMED_TEXT = frozenset({"content", "arguments"})


@pytest.fixture
def on_the_fake(fake_upstream: Any) -> Iterator[None]:
    with override_settings(
        COPILOT_RUNTIME=runtime_settings(
            fake_upstream.base_url, ACTIONS=["tests.support.actions.server_add"]
        )
    ):
        yield


@pytest.fixture
def schemas_used(monkeypatch: pytest.MonkeyPatch) -> list[GraphQLSchema]:
    """Each schema the executor validated or executed with, or coerced variables with."""
    used: list[GraphQLSchema] = []

    def recording(function: Callable[..., Any]) -> Callable[..., Any]:
        def call(used_schema: GraphQLSchema, *args: Any, **kwargs: Any) -> Any:
            used.append(used_schema)
            return function(used_schema, *args, **kwargs)

        return call

    for module, name in (
        (execution, "validate"),
        (execution, "experimental_execute_incrementally"),
        (fastpath, "get_variable_values"),
    ):
        monkeypatch.setattr(module, name, recording(getattr(module, name)))
    return used


def _data(thread_id: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "frontend": {"actions": []},
        "messages": [
            {
                "id": "u1",
                "createdAt": "2025-01-01T00:00:00.000Z",
                "textMessage": {"content": TOOL_THEN_TEXT, "role": "user"},
            }
        ],
        "metadata": {"requestType": "Chat"},
    }


async def _served(body: dict[str, Any]) -> dict[str, Any]:
    """The client's result: the multipart parts merged as urql merges them."""
    response = await AsyncClient().post(
        "/api/copilotkit",
        orjson.dumps(body),
        content_type="application/json",
        headers={"Accept": ACCEPT},
    )
    assert response.status_code == 200
    assert response["Content-Type"] == 'multipart/mixed; boundary="-"'
    raw = b"".join([chunk async for chunk in response.streaming_content])
    parts = [part.split(b"\r\n\r\n", 1)[1] for part in raw.split(b"\r\n---")[1:-1]]
    payloads = [orjson.loads(part) for part in parts]
    assert len(payloads) > 1, "nothing was deferred or streamed"
    assert payloads[-1]["hasNext"] is False
    return urql_merge(payloads)


def _comparable(value: Any, names: dict[str, str] | None = None) -> Any:
    """``value`` with each identifier a turn makes replaced by its first-seen order, its times
    by one placeholder, and streamed text joined."""
    names = {} if names is None else names
    if isinstance(value, list):
        return [_comparable(item, names) for item in value]
    if not isinstance(value, dict):
        return value
    comparable = {}
    for key, item in value.items():
        if key in FRESH_IDS and isinstance(item, str):
            comparable[key] = names.setdefault(item, f"<{len(names)}>")
        elif key in TIMES and isinstance(item, str):
            comparable[key] = "<time>"
        elif key in STREAMED_TEXT and isinstance(item, list):
            comparable[key] = "".join(item)
        else:
            comparable[key] = _comparable(item, names)
    return comparable


async def _both_documents(lane: str) -> list[dict[str, Any]]:
    general = await _served(
        {"query": GENERAL_DOCUMENT, "variables": {"data": _data(f"strawberry-lane-{lane}-1")}}
    )
    # The client's own document, its variables in a shape the fast path leaves to graphql-core
    # (a variable it does not know of): coerced with the schema.
    client = await _served(
        {
            "operationName": "generateCopilotResponse",
            "query": client_mutation_printed(),
            "variables": {
                "data": _data(f"strawberry-lane-{lane}-2"),
                "properties": {},
                "unused": 1,
            },
        }
    )
    return [_comparable(general), _comparable(client)]


@pytest.mark.django_db(transaction=True)
async def test_a_v1_turn_is_served_the_same_with_the_lane_closed(
    on_the_fake: None,
    schemas_used: list[GraphQLSchema],
    fresh_validation: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_the_lane = await _both_documents("open")
    assert len(schemas_used) == 4 and all(used is schema._schema for used in schemas_used)

    general, client = with_the_lane
    assert not general["errors"] and not client["errors"]
    turn = general["data"]["generateCopilotResponse"]
    assert turn["status"] == {"code": "Success"}
    call, outcome, text = turn["messages"]
    assert (call["name"], call["arguments"]) == ("serverAdd", '{"a":2,"b":3}')
    assert outcome["result"] == '{"sum":5}'
    assert text["content"] == "Five it is"

    _close_by_version(monkeypatch)
    assert not lane_open(STRAWBERRY)
    execution._parse_and_validate.cache_clear()
    schemas_used.clear()
    without_the_lane = await _both_documents("closed")

    built = graphql_core_schema(schema)
    assert built is not schema._schema
    # Both validated, the general one executed and the client's variables coerced: all on
    # the built schema.
    assert len(schemas_used) == 4 and all(used is built for used in schemas_used)
    assert without_the_lane == with_the_lane
    await sync_to_async(connections.close_all)()
