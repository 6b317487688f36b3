"""Images and documents in v2 user messages: which parts are taken, refused and limited, the
rows they are stored as, and the model requests built from them for each model kind."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.test import override_settings

from agents.agui_client.run_input import agui_messages as forwarded_messages
from conversations.models import Message
from copilot_runtime.adapters.anthropic_adapter import messages_request
from copilot_runtime.adapters.base import ModelRequest
from copilot_runtime.adapters.openai_adapter import with_text_documents_inlined
from copilot_runtime.agui.messages import agui_messages as replayed_messages
from copilot_runtime.agui.run_input import (
    InvalidRunInput,
    input_messages_from_agui,
    run_input_parse,
)
from copilot_runtime.engine.model_messages import model_messages

PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()
NOTES = base64.b64encode(b"Buy milk\nCall Bob").decode()
PNG_URL = "https://example.com/cat.png"
PDF_URL = "https://example.com/report.pdf"


def user_with(*parts: dict[str, Any], message_id: str = "u1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": [{"type": "text", "text": "Look"}, *parts]}


def source(kind: str, value: str, mime_type: str | None = None, **extra: Any) -> dict[str, Any]:
    src: dict[str, Any] = {"type": kind, "value": value}
    if mime_type is not None:
        src["mimeType"] = mime_type
    return {"source": src, **extra}


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "threadId": "t1",
        "runId": "r1",
        "messages": list(messages),
        "tools": [],
        "context": [],
    }


def issues_of(raw: dict[str, Any]) -> list[tuple[list[Any], str]]:
    with pytest.raises(InvalidRunInput) as raised:
        run_input_parse(raw)
    return [(issue.as_dict()["path"], issue.message) for issue in raised.value.issues]


def test_url_images_pdfs_and_text_documents_become_rows() -> None:
    message = user_with(
        {"type": "image", **source("url", PNG_URL, "image/png")},
        {"type": "document", **source("data", PDF, "application/pdf")},
        {"type": "document", **source("url", PDF_URL, "application/pdf")},
        {
            "type": "document",
            **source("data", NOTES, "text/plain"),
            "metadata": {"filename": "notes.txt"},
        },
        {"type": "binary", "mimeType": "image/jpeg", "url": "https://example.com/dog.jpg"},
    )
    parsed = run_input_parse(body(message))
    rows = input_messages_from_agui(parsed.messages)
    assert [(r.id, r.kind, r.content, r.image_format, r.image_bytes) for r in rows] == [
        ("u1", "text", "Look", "", ""),
        ("u1-image-1", "image", "", "png", PNG_URL),
        ("u1-document-2", "document", "document-2.pdf", "application/pdf", PDF),
        ("u1-document-3", "document", "document-3.pdf", "application/pdf", PDF_URL),
        ("u1-document-4", "document", "notes.txt", "text/plain", NOTES),
        ("u1-image-5", "image", "", "jpeg", "https://example.com/dog.jpg"),
    ]
    assert {r.parent_message_id for r in rows[1:]} == {"u1"}


@pytest.mark.parametrize(
    ("part", "said"),
    [
        ({"type": "audio", **source("data", "AAAA", "audio/wav")}, "'audio'"),
        ({"type": "video", **source("url", "https://x.test/v.mp4", "video/mp4")}, "'video'"),
        (
            {"type": "document", **source("data", "AAAA", "application/msword")},
            "'application/msword'",
        ),
        ({"type": "binary", "mimeType": "audio/mpeg", "data": "AAAA"}, "'audio/mpeg'"),
        ({"type": "binary", "mimeType": "image/png", "id": "f1"}, "an id alone"),
        ({"type": "document", **source("url", "https://x.test/a.txt", "text/plain")}, "as data"),
        ({"type": "image", **source("url", "file:///etc/passwd", "image/png")}, "http(s)"),
        ({"type": "image", **source("data", "AAAA")}, "mimeType"),
        ({"type": "image", **source("data", "data:image/png;base64,AAAA", "image/png")}, "base64"),
        ({"type": "image", **source("data", "https://x.test/a.png", "image/png")}, "base64"),
        ({"type": "sticker", "id": "s1"}, "Invalid discriminator"),
    ],
)
def test_a_part_no_model_takes_is_refused_naming_it(part: dict[str, Any], said: str) -> None:
    [(path, message)] = issues_of(body(user_with(part)))
    assert path[:4] == ["messages", 0, "content", 1]
    assert said in message


@override_settings(COPILOT_RUNTIME={"MAX_MEDIA_PART_BYTES": 1000, "MAX_MEDIA_REQUEST_BYTES": 1500})
def test_limits_per_part_and_per_new_turn_not_the_resent_history() -> None:
    def image(size: int) -> dict[str, Any]:
        return {"type": "image", **source("data", "A" * (size * 4 // 3), "image/png")}

    [(path, message)] = issues_of(body(user_with(image(1200))))
    assert path == ["messages", 0, "content", 1]
    assert "1200 bytes, over the 1000-byte limit per part" in message

    two = user_with(image(900), image(900))
    [(path, message)] = issues_of(body(two))
    assert path == ["messages"]
    assert "1800 bytes, over the 1500-byte limit per request" in message

    # A long conversation: each turn's images were taken when sent, so only the last counts.
    history = [
        user_with(image(900), message_id="u1"),
        {"id": "a1", "role": "assistant", "content": "A cat"},
        user_with(image(900), message_id="u2"),
        {"id": "a2", "role": "assistant", "content": "A dog"},
        user_with(image(900), message_id="u3"),
    ]
    assert len(run_input_parse(body(*history)).messages) == 5


def rows_for(*parts: dict[str, Any]) -> list[Any]:
    return input_messages_from_agui(run_input_parse(body(user_with(*parts))).messages)


def test_model_requests_for_each_part_kind_and_model_kind() -> None:
    rows = rows_for(
        {"type": "image", **source("url", PNG_URL, "image/png")},
        {"type": "image", **source("data", "iVBORw0K", "image/png")},
        {
            "type": "document",
            **source("data", PDF, "application/pdf"),
            "metadata": {"name": "r.pdf"},
        },
        {"type": "document", **source("url", PDF_URL, "application/pdf")},
        {"type": "document", **source("data", NOTES, "text/plain")},
    )
    messages = model_messages(rows, [])
    parts = [m["content"][0] for m in messages[1:]]
    assert parts == [
        {"type": "image_url", "image_url": {"url": PNG_URL}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
        {
            "type": "file",
            "file": {"filename": "r.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
        },
        {"type": "file", "file": {"filename": "document-4.pdf", "file_data": PDF_URL}},
        {
            "type": "file",
            "file": {"filename": "document-5.txt", "file_data": f"data:text/plain;base64,{NOTES}"},
        },
    ]

    # OpenAI-compatible: PDFs stay file parts, a text file is inlined with its name.
    openai = [m["content"][0] for m in with_text_documents_inlined(messages)[1:]]
    assert openai[:4] == parts[:4]
    assert openai[4] == {"type": "text", "text": "File document-5.txt:\nBuy milk\nCall Bob"}

    # Anthropic: images by url or base64, documents as document blocks titled with the name.
    _, anthropic = messages_request(ModelRequest(messages=messages))
    [turn] = anthropic
    assert turn["content"] == [
        {"type": "text", "text": "Look"},
        {"type": "image", "source": {"type": "url", "url": PNG_URL}},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
        },
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            "title": "r.pdf",
        },
        {"type": "document", "source": {"type": "url", "url": PDF_URL}, "title": "document-4.pdf"},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Buy milk\nCall Bob"},
            "title": "document-5.txt",
        },
    ]


def test_messages_without_parts_are_sent_as_they_are() -> None:
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert with_text_documents_inlined(messages) is messages


def test_stored_rows_come_back_as_the_parts_they_came_in_as() -> None:
    """The v2 client's replay of a thread (stored rows) and the history an AG-UI agent is
    forwarded (the turn's rows) give back URL images and documents as they were sent."""
    sent = [
        {"type": "image", **source("url", PNG_URL, "image/png")},
        {"type": "image", **source("data", "iVBORw0K", "image/png")},
        {
            "type": "document",
            **source("data", PDF, "application/pdf"),
            "metadata": {"filename": "r.pdf"},
        },
        {
            "type": "document",
            **source("url", PDF_URL, "application/pdf"),
            "metadata": {"filename": "document-4.pdf"},
        },
    ]
    rows = rows_for(*sent)[1:]
    forwarded = [message["content"][0] for message in forwarded_messages(rows)]
    stored = [
        Message(
            message_id=row.id,
            kind=row.kind,
            role="user",
            content=row.content,
            image_format=row.image_format,
            image_bytes=row.image_bytes,
        )
        for row in rows
    ]
    replayed = [message["content"][0] for message in replayed_messages(stored)]
    assert forwarded == replayed == sent
