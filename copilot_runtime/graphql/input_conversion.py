"""``input_to_dict``: a strawberry input object as the plain JSON-like dict the client sent.

Keys are the SDL's camelCase names, enums their wire names, datetimes ISO strings
(``2025-01-01T00:00:00.000Z``); fields left ``None`` are omitted. The engine works on this
dict, so it never depends on strawberry types.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any

from strawberry.types.base import has_object_definition
from strawberry.types.enum import has_enum_definition
from strawberry.types.unset import UNSET

from copilot_runtime.graphql.naming import NAME_CONVERTER
from copilot_runtime.graphql.types.scalars import format_datetime_iso


def input_to_dict(value: Any) -> dict[str, Any]:
    """Convert one strawberry input object (and everything below it) to a plain dict."""
    if not has_object_definition(value):
        raise TypeError(f"expected a strawberry input object, got {type(value).__name__}")
    converted = _to_plain(value)
    assert isinstance(converted, dict)
    return converted


def _to_plain(value: Any) -> Any:
    if has_object_definition(value):
        plain: dict[str, Any] = {}
        for field in value.__strawberry_definition__.fields:
            field_value = getattr(value, field.python_name)
            if field_value is None or field_value is UNSET:
                continue
            plain[NAME_CONVERTER.get_graphql_name(field)] = _to_plain(field_value)
        return plain
    if isinstance(value, Enum):
        return _enum_wire_name(value)
    if isinstance(value, datetime):
        return format_datetime_iso(value)
    if isinstance(value, list | tuple):
        return [_to_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _to_plain(item) for key, item in value.items()}
    return value


def _enum_wire_name(member: Enum) -> Any:
    enum_type = type(member)
    if has_enum_definition(enum_type):
        for enum_value in enum_type.__strawberry_definition__.values:
            if enum_value.value == member.value:
                return enum_value.name
    return member.value


def coerced_to_plain(value: Any) -> Any:
    """Variables as graphql-core coerced them (camelCase dicts, enum members, datetimes) as
    the plain JSON-like values the engine reads."""
    return _to_plain(value)
