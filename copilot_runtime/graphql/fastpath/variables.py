"""The client mutation's variables, checked and made plain without graphql-core per value.

graphql-core's variable coercion (``get_variable_values``) walks every value of every message
through the schema's types, parses each ``createdAt`` into a datetime that is formatted back
for the engine: a cost that grows with the history every request re-sends (about half the
CPU of a request on a long thread). The client mutation's variables have one fixed shape, so
``plain_client_variables`` checks them against the same schema types directly and returns
what ``coerced_to_plain(get_variable_values(...))`` would: camelCase dicts, enum wire names,
JavaScript ``toISOString`` dates, explicit nulls kept, absent fields left out or given
their input default.

Anything it is not sure about (a wrong type, an unknown field, a missing required field, a
date in another form, an out-of-range number) returns ``None``: the caller then coerces with
graphql-core, which gives the exact error (or the same value). A property test compares the
two on generated variables (tests/copilot_runtime/graphql/test_fast_variables.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import cache
from typing import Any

from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLScalarType,
    Undefined,
)

from copilot_runtime.fastlane.strawberry import graphql_core_schema
from copilot_runtime.graphql.schema import schema
from copilot_runtime.graphql.turn_input import parsed_range
from copilot_runtime.history import KnownHistory

# What JavaScript's Date.prototype.toISOString writes (what the clients send), which
# DateTimeISO coerces back to the very same string.
_ISO_MILLIS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", re.ASCII)
# Beyond this an int is not exactly a float (graphql-core refuses what it cannot represent).
_EXACT_FLOAT = 2**53


class _Unsure(Exception):
    """Leave this value to graphql-core."""


Plain = Callable[[Any], Any]


def _string(value: Any) -> Any:
    if type(value) is not str:
        raise _Unsure
    return value


def _boolean(value: Any) -> Any:
    if type(value) is not bool:
        raise _Unsure
    return value


def _float(value: Any) -> Any:
    if type(value) is float and math.isfinite(value):
        return value
    if type(value) is int and -_EXACT_FLOAT < value < _EXACT_FLOAT:
        return float(value)
    raise _Unsure


def _datetime(value: Any) -> Any:
    if type(value) is not str or not _ISO_MILLIS.fullmatch(value):
        raise _Unsure
    return value


def _json(value: Any) -> Any:
    return value


def _json_object(value: Any) -> Any:
    if type(value) is not dict:
        raise _Unsure
    return value


_SCALARS: dict[str, Plain] = {
    "String": _string,
    "Boolean": _boolean,
    "Float": _float,
    "DateTimeISO": _datetime,
    "JSON": _json,
    "JSONObject": _json_object,
}


def _plan(of: GraphQLInputType) -> tuple[Plain, bool]:
    """A function making a value of type ``of`` plain, and whether the type is non-null."""
    if isinstance(of, GraphQLNonNull):
        inner, _ = _plan(of.of_type)
        return inner, True
    if isinstance(of, GraphQLList):
        item, item_required = _plan(of.of_type)

        def plain_list(value: Any) -> Any:
            if type(value) is not list:
                raise _Unsure  # graphql-core wraps a single value: rare, left to it
            out = []
            same = True
            for entry in value:
                if entry is None:
                    if item_required:
                        raise _Unsure
                    out.append(None)
                else:
                    made = item(entry)
                    same = same and made is entry
                    out.append(made)
            return value if same else out  # already plain: no copy

        return plain_list, False
    if isinstance(of, GraphQLEnumType):
        names = frozenset(of.values)

        def plain_enum(value: Any) -> Any:
            if type(value) is not str or value not in names:
                raise _Unsure
            return value

        return plain_enum, False
    if isinstance(of, GraphQLScalarType):
        scalar = _SCALARS.get(of.name)
        if scalar is None:
            raise TypeError(f"no fast check for the scalar {of.name}")
        return scalar, False
    if isinstance(of, GraphQLInputObjectType):
        return _object_plan(of), False
    raise TypeError(f"no fast check for {of}")


def _object_plan(of: GraphQLInputObjectType) -> Plain:
    fields: dict[str, tuple[Plain, bool]] = {}
    defaults: dict[str, Any] = {}
    required: set[str] = set()  # non-null fields without a default: must be sent
    # Filled lazily: input types may refer to each other (MetaEventInput -> MessageInput).
    resolved = False

    def resolve() -> None:
        nonlocal resolved
        for name, field in of.fields.items():
            fields[name] = _plan(field.type)
            if field.default_value is not Undefined and field.default_value is not None:
                defaults[name] = field.default_value
            elif fields[name][1]:
                required.add(name)
        resolved = True

    def plain_object(value: Any) -> Any:
        if not resolved:
            resolve()
        if type(value) is not dict:
            raise _Unsure
        out: dict[str, Any] = {}
        same = True
        for name, entry in value.items():
            known = fields.get(name)
            if known is None:
                raise _Unsure  # an unknown field: graphql-core names it
            if entry is None:
                if known[1]:
                    raise _Unsure
                out[name] = None  # an explicit null stays (graphql-core keeps it too)
                continue
            made = known[0](entry)
            same = same and made is entry
            out[name] = made
        if len(value) < len(fields):  # some fields absent: required ones refused, defaults in
            if not required.issubset(value.keys()):
                raise _Unsure
            for name, default in defaults.items():
                if name not in value:
                    out[name] = default
                    same = False
        # Already plain (what the clients send): the value itself, not a copy of it. A
        # remembered message is then kept once, not twice (plain values are never mutated).
        return value if same else out

    return plain_object


@cache
def _data_plan() -> Plain:
    # Cached once for either lane: both schemas hold the converter's same input type.
    input_type = graphql_core_schema(schema).type_map["GenerateCopilotResponseInput"]
    assert isinstance(input_type, GraphQLInputObjectType)
    return _object_plan(input_type)


def plain_client_variables(
    variables: dict[str, Any], history: KnownHistory | None = None
) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """``(data, properties)`` as the engine reads them, or None to coerce with graphql-core.
    The messages of ``history`` (the request's, copilot_runtime/history) that the v1 parse
    made before were checked then and are plain: they are not checked again."""
    data = variables.get("data")
    properties = variables.get("properties")
    if data is None or (properties is not None and type(properties) is not dict):
        return None
    if any(name not in ("data", "properties") for name in variables):
        return None
    try:
        return _plain_data(data, history), properties
    except _Unsure:
        return None


def _plain_data(data: Any, history: KnownHistory | None) -> Any:
    messages = data.get("messages") if type(data) is dict else None
    start, stop = parsed_range(history, messages)
    if stop <= start:
        return _data_plan()(data)
    assert messages is not None  # a range of them was parsed
    # The history comes back with every turn: only the messages not parsed before are checked.
    unknown = [*messages[:start], *messages[stop:]]
    plain = _data_plan()({**data, "messages": unknown})
    checked = plain["messages"]
    if checked is not unknown:  # some made plain anew: in their places
        messages = [*checked[:start], *messages[start:stop], *checked[start:]]
    return {**plain, "messages": messages}
