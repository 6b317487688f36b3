"""The bytes the real CopilotKit client (runtime-client-gql 1.10.6 over urql 5) sends.

The chat's ``generateCopilotResponse`` is a POST with a compact JSON body
``{"operationName", "query", "variables": {"data": {...}, "properties": {}}}`` whose ``query`` is
urql's re-print of the fixed mutation (``client_mutation_printed()``, the exact document the
server's fast path recognises), with the headers the client sets. Each request starts a fresh
thread (a new ``threadId``, ``runId`` null), as a first message in a new chat does, so no
request waits for a busy thread.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from functools import cache
from typing import Any

OPERATION_NAME = "generateCopilotResponse"
CLIENT_GQL_VERSION = "1.10.6"
ACCEPT = (
    "application/graphql-response+json, application/graphql+json, application/json, "
    "text/event-stream, multipart/mixed"
)
PAGE_URL = "http://127.0.0.1/page"
SAY_HELLO_SCHEMA = json.dumps(
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    separators=(",", ":"),
)


@cache
def client_document() -> str:
    """urql's print of the mutation, from the product's own builder.

    Importing it loads the runtime's GraphQL package, which needs Django's app registry.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "copilot_runtime.site.settings")
    import django

    django.setup()
    from copilot_runtime.graphql.fastpath.documents import client_mutation_printed

    return client_mutation_printed()


def user_message_text(*, tokens: int) -> str:
    """A user message asking the fake upstream for a reply of exactly ``tokens`` tokens."""
    return f'Hi\nFAKE: {{"tokens": {tokens}}}'


def _js_iso_now() -> str:
    """``new Date().toISOString()``: millisecond precision, ``Z`` suffix."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def request_variables(*, thread_id: str, tokens: int) -> dict[str, Any]:
    """``variables`` as the 1.10.6 chat sends them for a first message (reference 2.2)."""
    return {
        "data": {
            "forwardedParameters": {"temperature": 0.5},
            "frontend": {
                "actions": [
                    {
                        "available": "enabled",
                        "description": "Say hello",
                        "jsonSchema": SAY_HELLO_SCHEMA,
                        "name": "sayHello",
                    }
                ],
                "url": PAGE_URL,
            },
            "messages": [
                {
                    "createdAt": _js_iso_now(),
                    "id": f"ck-{uuid.uuid4()}",
                    "textMessage": {"content": user_message_text(tokens=tokens), "role": "user"},
                }
            ],
            "metadata": {"requestType": "Chat"},
            "runId": None,
            "threadId": thread_id,
        },
        "properties": {},
    }


def request_body(*, thread_id: str, tokens: int) -> bytes:
    """The JSON body, compact like ``JSON.stringify``, keys in urql's order."""
    body = {
        "operationName": OPERATION_NAME,
        "query": client_document(),
        "variables": request_variables(thread_id=thread_id, tokens=tokens),
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def http_request(
    *, host: str, path: str, body: bytes, extra_headers: dict[str, str] | None = None
) -> bytes:
    """The whole HTTP/1.1 request (keep-alive), ready to write to a socket."""
    headers = {
        "host": host,
        "connection": "keep-alive",
        "accept": ACCEPT,
        "content-type": "application/json",
        "x-copilotkit-runtime-client-gql-version": CLIENT_GQL_VERSION,
        **(extra_headers or {}),
        "content-length": str(len(body)),
    }
    head = f"POST {path} HTTP/1.1\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items()
    )
    return head.encode("latin-1") + b"\r\n" + body


def new_thread_id() -> str:
    return str(uuid.uuid4())
