"""A thread as one JSON document: the thread, its messages, agent states, runs and spans.

Streamed in chunks from server-side cursors, so a thread of any size is exported without
holding it in memory. Sections the user may not view are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from django.db.models import QuerySet

from conversations.models import AgentState, Message, Run, Span, Thread

CHUNK_BYTES = 64 * 1024
ROWS_PER_QUERY = 2000
SECTIONS = ("messages", "agent_states", "runs", "spans")


def _default(value: Any) -> Any:
    return str(value)  # Decimal costs, and anything else orjson does not know


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_default)


def _section_rows(thread: Thread, section: str) -> QuerySet[Any]:
    if section == "messages":
        return Message.objects.filter(thread=thread).order_by("position").values()
    if section == "agent_states":
        return AgentState.objects.filter(thread=thread).order_by("id").values()
    if section == "runs":
        fields = [f.name if not f.is_relation else f.attname for f in Run._meta.concrete_fields]
        fields.remove("request_payload")  # the executor's copy of the request, not history
        return Run.objects.filter(thread=thread).order_by("created_at", "id").values(*fields)
    if section == "spans":
        return (
            Span.objects.filter(run__thread=thread).order_by("run_id", "started_at", "id").values()
        )
    raise ValueError(section)


def thread_as_dict(thread: Thread) -> dict[str, Any]:
    return {
        "thread_id": thread.thread_id,
        "title": thread.title,
        "owner": thread.owner.get_username() if thread.owner is not None else None,
        "agent_name": thread.agent_name,
        "status": thread.status,
        "metadata": thread.metadata,
        "created_at": thread.created_at,
        "updated_at": thread.updated_at,
    }


def _pieces(thread: Thread, sections: Iterable[str]) -> Iterator[bytes]:
    yield b'{"thread":' + _dumps(thread_as_dict(thread))
    for section in SECTIONS:
        if section not in sections:
            continue
        yield b',"' + section.encode() + b'":['
        first = True
        for row in _section_rows(thread, section).iterator(chunk_size=ROWS_PER_QUERY):
            yield (b"" if first else b",") + _dumps(row)
            first = False
        yield b"]"
    yield b"}"


def thread_export_chunks(*, thread: Thread, sections: Iterable[str]) -> Iterator[bytes]:
    """The document, in chunks of about ``CHUNK_BYTES``."""
    buffer: list[bytes] = []
    size = 0
    for piece in _pieces(thread, set(sections)):
        buffer.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield b"".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield b"".join(buffer)
