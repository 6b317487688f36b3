"""What a model call was sent, rebuilt from the references on its span, and a span's
attributes as rows.

A generation span's input refers to what the call was sent (``copilot_runtime/tracing/
content.py``): the system prompt and tools by hash (``TraceBlob``), the thread's stored
messages by the ids of the first and last, and the entries its run added before it, which are
the run's earlier calls' answers and their tools' results (those spans' outputs). For a page of
spans this reads the blobs in one query, and each distinct range of messages in two.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from conversations.admin.rendering import json_text, json_text_of_string
from conversations.models import SET_ASIDE_KINDS, Message, MessageKind, Span, TraceBlob

# Shown in place of a value too long for a table cell.
ATTRIBUTE_SHOWN = 300


@dataclass(frozen=True, slots=True)
class PromptEntry:
    role: str
    text: str
    source: str  # "system", "tools", "history", "run": where the inspector found it


@dataclass(frozen=True, slots=True)
class CallPrompt:
    entries: list[PromptEntry]
    # Why the rebuilt prompt may differ from what was sent (history changed since, purged).
    note: str = ""


def attribute_rows(attributes: dict[str, Any] | None) -> list[tuple[str, str]]:
    """A span's attributes as (name, value) rows, by name: scalars as they are, lists joined,
    anything else as compact JSON."""
    rows = []
    for name, value in sorted((attributes or {}).items()):
        if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            text = ", ".join(str(v) for v in value)
        elif isinstance(value, dict | list):
            text = json_text(value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float):
            text = format(Decimal(repr(value)), "f")  # 0.00000315, not 3.15e-06
        else:
            text = str(value)
        if len(text) > ATTRIBUTE_SHOWN:
            text = text[:ATTRIBUTE_SHOWN] + "…"
        rows.append((name, text))
    return rows


def _message_text(message: Message) -> tuple[str, str]:
    if message.kind == MessageKind.ACTION_EXECUTION:
        return "assistant", f"calls {message.action_name}({json_text(message.arguments)})"
    if message.kind == MessageKind.RESULT:
        return "tool", json_text_of_string(message.result)
    if message.kind in (MessageKind.IMAGE, MessageKind.DOCUMENT):
        return message.role or "user", f"[{message.kind}: {message.image_format or 'file'}]"
    return message.role or "user", message.content


def _history(
    thread_pk: int, reference: dict[str, Any], cache: dict[tuple[str, str], list[Message]]
) -> tuple[list[PromptEntry], str]:
    key = (str(reference.get("first")), str(reference.get("last")))
    if key not in cache:
        ends = dict(
            Message.objects.filter(thread_id=thread_pk, message_id__in=key).values_list(
                "message_id", "position"
            )
        )
        rows: list[Message] = []
        if key[0] in ends and key[1] in ends:
            rows = list(
                Message.objects.filter(
                    thread_id=thread_pk, position__gte=ends[key[0]], position__lte=ends[key[1]]
                )
                .exclude(kind__in=SET_ASIDE_KINDS)
                .order_by("position")
            )
        cache[key] = rows
    rows = cache[key]
    count = int(reference.get("count") or 0)
    if len(rows) != count:
        # Messages set aside later by a diverging client sit in the range: the call had the
        # others. Instructions the client re-sent under new ids were its system prompt.
        rows = [m for m in rows if not m.superseded]
        if len(rows) != count:
            rows = [m for m in rows if m.role not in ("system", "developer")]
    note = ""
    if not rows and count:
        note = f"The {count} stored message(s) this call was sent are no longer stored."
    elif len(rows) != count:
        note = f"The call was sent {count} stored message(s); {len(rows)} are shown."
    entries = []
    for message in rows:
        role, text = _message_text(message)
        entries.append(PromptEntry(role=role, text=text, source="history"))
    return entries, note


def _run_entries(earlier_calls: list[Span], results: dict[str, Any]) -> list[PromptEntry]:
    """The entries a run added before a call: each earlier call's answer, then its tools'
    results, as the engine appended them."""
    entries = []
    for call in earlier_calls:
        output = call.output if isinstance(call.output, dict) else {}
        calls = output.get("tool_calls") or []
        text = output.get("content") or ""
        for tool_call in calls:
            text += f"\ncalls {tool_call.get('name')}({json_text(tool_call.get('arguments'))})"
        entries.append(PromptEntry(role="assistant", text=text.strip(), source="run"))
        for tool_call in calls:
            if tool_call.get("id") in results:
                result = json_text(results[tool_call["id"]])
                entries.append(PromptEntry(role="tool", text=result, source="run"))
    return entries


def call_prompts(*, thread_pk: int, spans: list[Span]) -> dict[str, CallPrompt]:
    """The rebuilt prompt of each generation span in ``spans`` (one run's, in start order)
    that carries references, by span id."""
    calls = [s for s in spans if s.kind == "generation" and isinstance(s.input, dict)]
    if not calls:
        return {}
    digests = {c.input.get(part) for c in calls for part in ("system", "tools")} - {None}
    blobs = dict(TraceBlob.objects.filter(sha256__in=digests).values_list("sha256", "content"))
    results = {
        s.attributes.get("gen_ai.tool.call.id"): s.output
        for s in spans
        if s.kind == "tool" and s.output is not None
    }
    histories: dict[tuple[str, str], list[Message]] = {}
    prompts: dict[str, CallPrompt] = {}
    for index, call in enumerate(calls):
        reference = call.input
        entries: list[PromptEntry] = []
        notes: list[str] = []
        system = reference.get("system")
        if system is not None:
            if system in blobs:
                for entry in blobs[system] or []:
                    entries.append(
                        PromptEntry(
                            role=str(entry.get("role", "system")),
                            text=str(entry.get("content", "")),
                            source="system",
                        )
                    )
            else:
                notes.append("Its system prompt is no longer stored.")
        if reference.get("history"):
            history, note = _history(thread_pk, reference["history"], histories)
            entries += history
            notes += [note] if note else []
        in_run = int(reference.get("in_run") or 0)
        if in_run:
            added = _run_entries(calls[:index], results)[:in_run]
            entries += added
            if len(added) < in_run:
                notes.append(f"{in_run - len(added)} entries this run added are not shown.")
        tools = reference.get("tools")
        if tools is not None and tools in blobs:
            names = [str((t.get("function") or t).get("name", "?")) for t in blobs[tools] or []]
            role = f"tools ({', '.join(names)})"
            entries.append(PromptEntry(role=role, text=json_text(blobs[tools]), source="tools"))
        prompts[call.span_id] = CallPrompt(entries=entries, note=" ".join(notes))
    return prompts
