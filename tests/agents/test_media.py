"""Which of a turn's images and documents a peer agent's format can carry: only the turn's
own input is checked, so an attachment answered earlier never fails a later turn."""

from __future__ import annotations

from agents.media import UNSUPPORTED_CONTENT_CODE, refused_media
from copilot_runtime.events.request import InputMessage


def _text(message_id: str, role: str) -> InputMessage:
    return InputMessage(id=message_id, kind="text", role=role, content="...")


def _media(message_id: str, kind: str) -> InputMessage:
    return InputMessage(id=message_id, kind=kind, role="user", image_bytes="AAAA")


def test_the_turns_new_media_outside_what_is_carried_is_refused_naming_the_kinds() -> None:
    messages = [_text("u1", "user"), _media("u1-image-1", "image"), _media("u1-doc-2", "document")]
    refused = refused_media(
        messages=messages, carried=frozenset(), agent_name="graph", label="a LangGraph agent"
    )
    assert refused is not None
    assert refused.code == UNSUPPORTED_CONTENT_CODE
    assert refused.details == {"agent": "graph", "kinds": ["document", "image"]}
    assert "cannot be sent documents or images" in refused.message


def test_carried_kinds_and_earlier_turns_attachments_pass() -> None:
    earlier = [_text("u1", "user"), _media("u1-doc-1", "document"), _text("a1", "assistant")]
    now = [*earlier, _text("u2", "user"), _media("u2-image-1", "image")]
    assert (
        refused_media(messages=now, carried=frozenset({"image"}), agent_name="a", label="x") is None
    )
    assert refused_media(
        messages=earlier[:2], carried=frozenset({"image"}), agent_name="a", label="x"
    )
