"""Reading the JSON body of a runtime request, with every transport-level refusal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse

from copilot_runtime.client_numbers import ClientNumberError, parse_client_int
from copilot_runtime.conf import runtime_setting
from copilot_runtime.http.responses import json_error

_JSON_CONTENT_TYPES = ("application/json", "application/graphql-response+json")
_TEXT_PLAIN = "text/plain"


@dataclass(frozen=True)
class JsonBody:
    value: Any
    # False when the body came as text/plain (tolerated for ``fetch()`` without headers): the
    # single-route envelope, which the TypeScript runtime takes as JSON only, refuses it.
    declared_json: bool = True


def too_large(limit: int) -> BodyRefusal:
    return BodyRefusal(
        413, "payload_too_large", f"The request body is larger than the limit of {limit} bytes."
    )


BAD_LENGTH = "The Content-Length header is not a number of bytes."


def declared_length_refusal(declared: str | None, limit: int) -> BodyRefusal | None:
    """A ``Content-Length`` that is not a decimal number (a 400: RFC 9112 makes it an
    unrecoverable framing error, and Django's own ``request.body`` would fail on it), or one
    above ``limit``, however many digits it has (a 413, before a byte of the body is read);
    None when it is absent or within the limit (the body is still read no further than it)."""
    if not declared:
        return None  # absent; an empty value is what some gateways pass for none
    try:
        parse_client_int(declared, minimum=0, maximum=limit)
    except ClientNumberError as refused:
        if refused.too_large:
            return too_large(limit)
        return BodyRefusal(400, "invalid_request", BAD_LENGTH)
    return None


def request_length_refusal(request: HttpRequest) -> BodyRefusal | None:
    """``declared_length_refusal`` of a request Django already parsed: a route that reads its
    body through ``request.body`` checks this first (with no front before Django, as in a host
    project, a malformed length would otherwise fail in Django's own ``int()``)."""
    limit = int(runtime_setting("MAX_BODY_BYTES"))
    return declared_length_refusal(request.headers.get("Content-Length"), limit)


# orjson reads up to 1,024 levels of nesting but writes at most 254, and what a request carries
# is written back (stored, forwarded): a body nested deeper is refused when it is read.
TOO_DEEP = "The request body nests JSON deeper than 254 levels."


def json_writable(value: Any) -> bool:
    """Whether ``value`` can be written back as JSON (one C pass, microseconds per KB)."""
    try:
        orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: nested too deeply
        return False
    return True


@dataclass(frozen=True)
class BodyRefusal:
    """Why a body was refused, for each surface to answer in its protocol's words."""

    status: int  # 413, 415 or 400
    error: str  # payload_too_large, unsupported_media_type, invalid_request, invalid_json
    message: str

    def response(self) -> HttpResponse:
        return json_error(self.status, self.error, self.message)


def not_json(more: str = "") -> BodyRefusal:
    return BodyRefusal(
        415,
        "unsupported_media_type",
        "The runtime accepts JSON request bodies only (Content-Type: application/json)." + more,
    )


def read_json_body(request: HttpRequest) -> JsonBody | BodyRefusal:
    """The parsed JSON body, or why it is refused."""
    limit = int(runtime_setting("MAX_BODY_BYTES"))
    refused = declared_length_refusal(request.headers.get("Content-Length"), limit)
    if refused is not None:
        return refused
    # Read the stream ourselves: request.body would apply Django's own (smaller, unrelated)
    # DATA_UPLOAD_MAX_MEMORY_SIZE instead of the runtime's limit.
    try:
        raw = request.read(limit + 1)
    except RequestDataTooBig:
        return too_large(limit)
    if len(raw) > limit:
        return too_large(limit)

    content_type = (request.content_type or "").lower()
    declared_json = content_type.endswith("json") or content_type in _JSON_CONTENT_TYPES
    if not declared_json and content_type != _TEXT_PLAIN:
        return not_json()
    # text/plain is tolerated because fetch() without headers sends it, as long as the body is
    # JSON; a text/plain body that is not JSON is what a wrong content type looks like: a 415,
    # as the TypeScript runtime answers, where a JSON content type keeps the 400 below.
    if not raw.strip():
        if not declared_json:
            return not_json()
        return BodyRefusal(400, "invalid_request", "The request body is empty; JSON was expected.")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not declared_json:
            return not_json(f" The body is not JSON either: {exc}")
        return BodyRefusal(400, "invalid_json", f"The request body is not valid JSON: {exc}")
    if not json_writable(value):
        return BodyRefusal(400, "invalid_json", TOO_DEEP)
    return JsonBody(value, declared_json=declared_json)
