"""Our schema against CopilotKit runtime 1.10.6's SDL, and the client's documents against ours.

The reference SDL (``copilotkit_1_10_6.graphql``) is the verbatim schema shipped in
``@copilotkit/runtime@1.10.6``. Every type, field, argument, input field, enum value,
interface implementation and union member in it must exist in our schema unchanged (same
type and nullability, same default, same deprecation). Additions are allowed (the
``@defer``/``@stream`` directives, later a Subscription type), as long as they are optional.

The documents in ``documents/`` are the client's: ``<name>.graphql`` verbatim from
runtime-client-gql 1.10.6's sources, ``<name>.urql.graphql`` the same documents after
``@urql/core`` 5.2.0's ``formatDocument`` (``__typename`` in every non-root selection set),
printed by the real packages, which is what goes on the wire.
"""

from __future__ import annotations

from typing import Any

import pytest
from graphql import build_schema, parse, validate
from graphql.utilities import introspection_from_schema

from copilot_runtime.graphql.execution import prepare_operation
from copilot_runtime.graphql.schema import schema
from tests.copilot_runtime.graphql.helpers import REFERENCE_SDL_PATH, document

Introspected = dict[str, Any]


def _type_ref(ref: Introspected) -> str:
    if ref["kind"] == "NON_NULL":
        return f"{_type_ref(ref['ofType'])}!"
    if ref["kind"] == "LIST":
        return f"[{_type_ref(ref['ofType'])}]"
    return ref["name"]


def _input_values(values: list[Introspected] | None) -> dict[str, Introspected]:
    return {
        value["name"]: {
            "type": _type_ref(value["type"]),
            "defaultValue": value["defaultValue"],
            "deprecationReason": value.get("deprecationReason"),
        }
        for value in values or []
    }


def _types_by_name(graphql_schema: Any) -> dict[str, Introspected]:
    introspection = introspection_from_schema(graphql_schema)
    return {
        named["name"]: named
        for named in introspection["__schema"]["types"]
        if not named["name"].startswith("__")
    }


def _compare_input_values(
    where: str, reference: dict[str, Introspected], ours: dict[str, Introspected]
) -> list[str]:
    problems = []
    for name, expected in reference.items():
        actual = ours.get(name)
        if actual is None:
            problems.append(f"{where}: missing `{name}: {expected['type']}`")
        elif actual != expected:
            problems.append(f"{where}.{name}: expected {expected}, ours is {actual}")
    for name, actual in ours.items():
        if (
            name not in reference
            and actual["type"].endswith("!")
            and actual["defaultValue"] is None
        ):
            problems.append(f"{where}: extra required `{name}: {actual['type']}`")
    return problems


def _compare_type(name: str, reference: Introspected, ours: Introspected) -> list[str]:
    if ours["kind"] != reference["kind"]:
        return [f"{name}: expected a {reference['kind']}, ours is a {ours['kind']}"]
    problems: list[str] = []
    for field in reference.get("fields") or []:
        our_field = next((f for f in ours.get("fields") or [] if f["name"] == field["name"]), None)
        where = f"{name}.{field['name']}"
        if our_field is None:
            problems.append(f"{name}: missing field `{field['name']}: {_type_ref(field['type'])}`")
            continue
        if _type_ref(our_field["type"]) != _type_ref(field["type"]):
            problems.append(
                f"{where}: expected type {_type_ref(field['type'])}, "
                f"ours is {_type_ref(our_field['type'])}"
            )
        if our_field["deprecationReason"] != field["deprecationReason"]:
            problems.append(
                f"{where}: expected deprecation {field['deprecationReason']!r}, "
                f"ours is {our_field['deprecationReason']!r}"
            )
        problems += _compare_input_values(
            f"{where}(args)", _input_values(field["args"]), _input_values(our_field["args"])
        )
    if reference["kind"] == "INPUT_OBJECT":
        problems += _compare_input_values(
            name, _input_values(reference["inputFields"]), _input_values(ours["inputFields"])
        )
    for key, label in (("interfaces", "implements"), ("possibleTypes", "member/implementation")):
        expected_names = {ref["name"] for ref in reference.get(key) or []}
        our_names = {ref["name"] for ref in ours.get(key) or []}
        for missing in sorted(expected_names - our_names):
            problems.append(f"{name}: missing {label} {missing}")
    if reference["kind"] == "ENUM":
        our_values = {value["name"]: value for value in ours["enumValues"]}
        for value in reference["enumValues"]:
            if value["name"] not in our_values:
                problems.append(f"{name}: missing enum value {value['name']}")
            elif our_values[value["name"]]["deprecationReason"] != value["deprecationReason"]:
                problems.append(f"{name}.{value['name']}: deprecation differs")
    if reference["kind"] == "SCALAR" and ours.get("specifiedByURL") != reference.get(
        "specifiedByURL"
    ):
        problems.append(
            f"{name}: expected @specifiedBy {reference.get('specifiedByURL')!r}, "
            f"ours is {ours.get('specifiedByURL')!r}"
        )
    return problems


def schema_mismatches(reference_sdl: str, graphql_schema: Any) -> list[str]:
    """Readable differences between the reference SDL and a schema (empty: compatible)."""
    reference_schema = build_schema(reference_sdl)
    reference_types = _types_by_name(reference_schema)
    our_types = _types_by_name(graphql_schema)
    problems = []
    for name, reference in sorted(reference_types.items()):
        if name not in our_types:
            problems.append(f"missing type {reference['kind']} {name}")
        else:
            problems += _compare_type(name, reference, our_types[name])
    for root in ("query_type", "mutation_type", "subscription_type"):
        expected = getattr(reference_schema, root)
        actual = getattr(graphql_schema, root)
        if expected is not None and (actual is None or actual.name != expected.name):
            problems.append(f"root {root}: expected {expected.name}, ours is {actual}")
    return problems


def test_schema_contains_the_reference_sdl_unchanged() -> None:
    problems = schema_mismatches(REFERENCE_SDL_PATH.read_text(), schema._schema)
    assert not problems, "schema differs from CopilotKit 1.10.6:\n  " + "\n  ".join(problems)


def test_the_comparison_reports_a_changed_schema() -> None:
    # A schema that drifted must fail: camel-cased acronym, nullability, default, enum value.
    drifted = (
        REFERENCE_SDL_PATH.read_text()
        .replace(
            "openaiAssistantAPI: OpenAIApiAssistantAPIResponse",
            "openaiAssistantApi: OpenAIApiAssistantAPIResponse",
        )
        .replace("  threadId: String!\n}\n\ninput", "  threadId: String\n}\n\ninput", 1)
        .replace("allowList: [String!] = []", "allowList: [String!]")
        .replace("  TextareaPopover\n", "")
    )
    problems = schema_mismatches(REFERENCE_SDL_PATH.read_text(), build_schema(drifted))
    joined = "\n".join(problems)
    assert "ExtensionsResponse: missing field `openaiAssistantAPI" in joined
    assert "GuardrailsRuleInput.allowList" in joined
    assert "CopilotRequestType: missing enum value TextareaPopover" in joined
    assert "LoadAgentStateResponse.threadId: expected type String!, ours is String" in joined


def test_incremental_directives_are_available() -> None:
    directives = {directive.name for directive in schema._schema.directives}
    assert {"defer", "stream"} <= directives


@pytest.mark.parametrize(
    "name",
    [
        "generate_copilot_response",
        "available_agents",
        "load_agent_state",
        "generate_copilot_response.urql",
        "available_agents.urql",
        "load_agent_state.urql",
    ],
)
def test_client_documents_validate(name: str) -> None:
    errors = validate(schema._schema, parse(document(name)))
    assert errors == []
    prepared = prepare_operation(query=document(name), variables=None, operation_name=None)
    assert not isinstance(prepared, list), prepared


def test_urql_documents_are_the_sources_with_typename_added() -> None:
    # Guards the fixtures: the urql variant differs only by the `__typename` selections.
    for name in ("generate_copilot_response", "available_agents", "load_agent_state"):
        urql_lines = [line.strip() for line in document(f"{name}.urql").splitlines()]
        source_lines = [line.strip() for line in document(name).splitlines()]
        assert [line for line in urql_lines if line and line != "__typename"] == [
            line for line in source_lines if line and line != "__typename"
        ]
        assert urql_lines.count("__typename") > source_lines.count("__typename")


def test_generate_mutation_is_incremental_and_the_queries_are_not() -> None:
    cases = {
        "generate_copilot_response": ("mutation", True),
        "generate_copilot_response.urql": ("mutation", True),
        "available_agents": ("query", False),
        "load_agent_state.urql": ("query", False),
    }
    for name, (operation_type, is_incremental) in cases.items():
        prepared = prepare_operation(query=document(name), variables=None, operation_name=None)
        assert not isinstance(prepared, list)
        # Without an operationName, the document's only operation is chosen by its name.
        assert prepared.operation_name == document(name).split()[1].split("(")[0]
        assert (prepared.operation_type, prepared.is_incremental) == (
            operation_type,
            is_incremental,
        ), name
