"""The contract's custom scalars: ``DateTimeISO``, ``JSON`` and ``JSONObject``.

They are ``NewType``s mapped through ``StrawberryConfig.scalar_map`` (see ``SCALAR_MAP``), so
resolvers simply pass ``datetime`` and plain JSON values.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NewType

import strawberry
from strawberry.types.scalar import ScalarDefinition

DateTimeISO = NewType("DateTimeISO", datetime)
JSON = NewType("JSON", object)
JSONObject = NewType("JSONObject", dict[str, Any])

_ECMA_404_URL = "http://www.ecma-international.org/publications/files/ECMA-ST/ECMA-404.pdf"


def format_datetime_iso(value: datetime) -> str:
    """``2026-11-21T21:38:11.344Z``: UTC, milliseconds, ``Z``, as JavaScript's toISOString."""
    if value.tzinfo is None:
        # Naive datetimes are taken as UTC (Django stores and hands out UTC).
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return f"{value:%Y-%m-%dT%H:%M:%S}.{value.microsecond // 1000:03d}Z"


def parse_datetime_iso(value: object) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"DateTimeISO cannot represent a non-string value: {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"DateTimeISO cannot represent an invalid date-time: {value!r}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _serialize_datetime_iso(value: object) -> str:
    if isinstance(value, datetime):
        return format_datetime_iso(value)
    if isinstance(value, str):
        return format_datetime_iso(parse_datetime_iso(value))
    raise ValueError(f"DateTimeISO cannot represent {type(value).__name__}")


def _identity(value: Any) -> Any:
    return value


def _parse_json_object(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("JSONObject cannot represent a non-object value")
    return value


DATE_TIME_ISO_SCALAR: ScalarDefinition = strawberry.scalar(
    name="DateTimeISO",
    description=(
        "A date-time string at UTC, such as 2007-12-03T10:15:30Z, compliant with the "
        "`date-time` format outlined in section 5.6 of the RFC 3339 profile of the ISO 8601 "
        "standard for representation of dates and times using the Gregorian calendar."
        "This scalar is serialized to a string in ISO 8601 format and parsed from a string "
        "in ISO 8601 format."
    ),
    serialize=_serialize_datetime_iso,
    parse_value=parse_datetime_iso,
)

JSON_SCALAR: ScalarDefinition = strawberry.scalar(
    name="JSON",
    description=(
        "The `JSON` scalar type represents JSON values as specified by "
        f"[ECMA-404]({_ECMA_404_URL})."
    ),
    specified_by_url=_ECMA_404_URL,
    serialize=_identity,
    parse_value=_identity,
)

JSON_OBJECT_SCALAR: ScalarDefinition = strawberry.scalar(
    name="JSONObject",
    description=(
        "The `JSONObject` scalar type represents JSON objects as specified by "
        f"[ECMA-404]({_ECMA_404_URL})."
    ),
    specified_by_url=_ECMA_404_URL,
    serialize=_parse_json_object,
    parse_value=_parse_json_object,
)

SCALAR_MAP: dict[object, ScalarDefinition] = {
    DateTimeISO: DATE_TIME_ISO_SCALAR,
    JSON: JSON_SCALAR,
    JSONObject: JSON_OBJECT_SCALAR,
}
