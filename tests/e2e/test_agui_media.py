"""Images and documents end to end: the real v2 core sends a user message with a URL image, a
PDF and a text file through the OpenAI-compatible and the Anthropic adapters (on the fake
upstream); the test checks what the model received and what the runtime stored, and that a
part no model takes (audio) is refused with a 400 naming it before anything is stored."""

from __future__ import annotations

import base64
import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Message
from tests.e2e.agui_client import run_agui
from tests.e2e.test_adapters_real_clients import adapter_setting
from tests.support.generate_e2e import server_env

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

CAT_URL = "https://example.com/cat.png"
PDF = base64.b64encode(b"%PDF-1.4 quarterly figures").decode()
# The fake model's reply rides in the message itself (a queued script could be taken by another
# request of the served process): the last user turn's text, for either model kind.
DIRECTIVE = 'FAKE: {"text": "A cat and a report"}'
NOTES_TEXT = f"Buy milk\n{DIRECTIVE}"
NOTES = base64.b64encode(NOTES_TEXT.encode()).decode()


def media_message(message_id: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "content": [
            {"type": "text", "text": f"Describe these\n{DIRECTIVE}"},
            {"type": "image", "source": {"type": "url", "value": CAT_URL, "mimeType": "image/png"}},
            {
                "type": "document",
                "source": {"type": "data", "value": PDF, "mimeType": "application/pdf"},
                "metadata": {"filename": "q3.pdf"},
            },
            {
                "type": "document",
                "source": {"type": "data", "value": NOTES, "mimeType": "text/plain"},
                "metadata": {"filename": "notes.txt"},
            },
        ],
    }


def expected_parts(kind: str) -> list[dict[str, Any]]:
    if kind == "anthropic":
        return [
            {"type": "image", "source": {"type": "url", "url": CAT_URL}},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                "title": "q3.pdf",
            },
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": NOTES_TEXT},
                "title": "notes.txt",
            },
        ]
    return [
        {"type": "image_url", "image_url": {"url": CAT_URL}},
        {
            "type": "file",
            "file": {"filename": "q3.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
        },
        {"type": "text", "text": f"File notes.txt:\n{NOTES_TEXT}"},
    ]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_url_image_a_pdf_and_a_text_file_reach_the_model_and_are_stored(
    live_server_factory: Any, fake_upstream: FakeUpstream, kind: str
) -> None:
    extra = {}
    if kind == "anthropic":
        adapter, _, _ = adapter_setting("anthropic", fake_upstream.base_url)
        extra["COPILOT_RUNTIME_ADAPTER"] = json.dumps(adapter)
    server = live_server_factory(env=server_env(fake_upstream.base_url, **extra))
    thread_id = f"media-{kind}-{uuid.uuid4()}"
    runtime_url = f"{server.url}/api/copilotkit"

    result = run_agui(
        {
            "runtimeUrl": runtime_url,
            "agentId": "default",
            "threadId": thread_id,
            "steps": [{"op": "run", "message": media_message("u1")}],
        }
    )
    assert result["errors"] == []
    assert [m["content"] for m in result["messages"] if m["role"] == "assistant"] == [
        "A cat and a report"
    ]

    [model_request] = [
        body for body in fake_upstream.requests() if json.dumps(body).find(CAT_URL) >= 0
    ]
    # OpenAI-compatible: one user entry per stored row; Anthropic: one merged user turn.
    parts = [
        part
        for message in model_request["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] != "text" or part["text"].startswith("File ")
    ]
    assert parts == expected_parts(kind)

    stored = Message.objects.filter(thread__thread_id=thread_id, role="user").order_by("position")
    assert [(m.kind, m.content, m.image_format, m.image_bytes) for m in stored][1:] == [
        ("image", "", "png", CAT_URL),
        ("document", "q3.pdf", "application/pdf", PDF),
        ("document", "notes.txt", "text/plain", NOTES),
    ]

    if kind == "openai":
        # Audio goes to no model this runtime speaks: refused with the part named, not dropped.
        refused_thread = f"media-refused-{uuid.uuid4()}"
        audio = {
            "type": "audio",
            "source": {"type": "data", "value": "AAAA", "mimeType": "audio/wav"},
        }
        refused = run_agui(
            {
                "runtimeUrl": runtime_url,
                "agentId": "default",
                "threadId": refused_thread,
                "steps": [
                    {
                        "op": "run",
                        "message": {"id": "u1", "content": [{"type": "text", "text": "Hi"}, audio]},
                    }
                ],
            }
        )
        assert refused["errors"], refused
        [run_call] = [h for h in refused["http"] if h["url"].endswith("/run")]
        assert run_call["status"] == 400
        answer = json.loads(run_call["responseText"])
        assert answer["error"] == "Invalid request body"
        assert json.loads(answer["details"]) == [
            {
                "path": ["messages", 0, "content", 1],
                "message": "audio part: Unsupported content part type 'audio': "
                "only images and documents",
            }
        ]
        assert not Message.objects.filter(thread__thread_id=refused_thread).exists()
