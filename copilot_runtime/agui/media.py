"""Images and documents in AG-UI user messages: which parts are taken, their limits, their rows.

A part's payload is stored as sent: base64 for a ``data`` source, the address for a ``url``
source (base64 never contains ``://``, so the two cannot be confused). Images become rows of
kind ``image`` (``image_format`` the subtype, as v1 stores them); documents rows of kind
``document`` (``image_format`` the full media type, ``content`` the file name).

Taken: images (any ``image/*``, as data or by http(s) address), PDF documents (data or
address), plain-text documents (data), and the legacy ``binary`` part carrying one of those.
Audio, video and every other document type are refused with the part's path, since no model
kind this runtime speaks accepts them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from copilot_runtime.conf import runtime_setting
from copilot_runtime.events.request import InputMessage

MEDIA_PARTS = ("image", "audio", "video", "document", "binary")
DOCUMENT_TYPES = ("application/pdf", "text/plain")
_URL_SCHEMES = ("https://", "http://")
# Standard base64 (what every model API takes); it never holds "://", which keeps a stored
# payload telling its address from its data.
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
# The media type column holds 32 characters.
_MAX_MEDIA_TYPE = 32


@dataclass(frozen=True, slots=True)
class MediaPart:
    kind: str  # image or document
    media_type: str
    value: str  # base64 or an http(s) address
    is_url: bool
    filename: str


def media_type_of(*, part: dict[str, Any]) -> str:
    if part.get("type") == "binary":
        return str(part.get("mimeType") or "application/octet-stream").lower()
    source = part.get("source") if isinstance(part.get("source"), dict) else {}
    return str(source.get("mimeType") or "").lower()


def decoded_size(*, value: str) -> int:
    """The bytes a base64 payload decodes to (its padding not counted)."""
    return len(value) * 3 // 4 - value[-2:].count("=")


def _filename(*, part: dict[str, Any], kind: str, media_type: str, index: int) -> str:
    metadata = part.get("metadata")
    for candidate in (
        part.get("filename"),
        metadata.get("filename") if isinstance(metadata, dict) else None,
        metadata.get("name") if isinstance(metadata, dict) else None,
    ):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()[:255]
    extension = {"application/pdf": "pdf", "text/plain": "txt"}.get(media_type, "bin")
    return f"{kind}-{index}.{extension}"


def media_part(*, part: dict[str, Any], index: int) -> MediaPart | str:
    """The part as taken, or why it is refused."""
    part_type = part.get("type")
    media_type = media_type_of(part=part)
    if part_type == "binary":
        value = part.get("data") or part.get("url")
        is_url = not part.get("data")
        if not isinstance(value, str) or not value:
            return "A binary part needs its data or url (an id alone names nothing stored here)"
        kind = "image" if media_type.startswith("image/") else "document"
    else:
        source = part.get("source")
        if not isinstance(source, dict) or source.get("type") not in ("data", "url"):
            return "Expected a source of type 'data' or 'url'"
        value = source.get("value")
        if not isinstance(value, str) or not value:
            return "Expected the source's value as a non-empty string"
        is_url = source.get("type") == "url"
        if not is_url and not media_type:
            return "A data source needs its mimeType"
        kind = "image" if part_type == "image" else "document"
        if part_type in ("audio", "video"):
            return f"Unsupported content part type '{part_type}': only images and documents"
    if kind == "image" and media_type and not media_type.startswith("image/"):
        return f"An image part with media type '{media_type}'"
    if kind == "document" and media_type not in DOCUMENT_TYPES:
        shown = media_type or "unknown"
        return (
            f"Unsupported document type '{shown}': only {', '.join(DOCUMENT_TYPES)} "
            "(with its mimeType) are taken"
        )
    if len(media_type) > _MAX_MEDIA_TYPE:
        return f"Media type longer than {_MAX_MEDIA_TYPE} characters"
    if is_url:
        if not value.startswith(_URL_SCHEMES) or len(value) > 2048:
            return "A url source must be an http(s) address of at most 2048 characters"
        if kind == "document" and media_type != "application/pdf":
            # Models fetch PDFs and images by address, not text files: the runtime would
            # have to download it, and fetching arbitrary addresses from the server is unsafe.
            return "A text document must be sent as data, not by url"
    elif not _BASE64.fullmatch(value):
        return "A data source's value must be base64 (without a data: prefix)"
    else:
        limit = int(runtime_setting("MAX_MEDIA_PART_BYTES"))
        size = decoded_size(value=value)
        if limit and size > limit:
            return f"The {kind} is {size} bytes, over the {limit}-byte limit per part"
    return MediaPart(
        kind=kind,
        media_type=media_type or "image/*",
        value=value,
        is_url=is_url,
        filename=_filename(part=part, kind=kind, media_type=media_type, index=index),
    )


def media_rows(*, message: dict[str, Any]) -> list[InputMessage]:
    """The image and document rows of a user message whose parts passed ``media_part``."""
    rows: list[InputMessage] = []
    for index, part in enumerate(message["content"]):
        if part.get("type") not in MEDIA_PARTS:
            continue
        taken = media_part(part=part, index=index)
        if isinstance(taken, str):
            continue
        if taken.kind == "image":
            subtype = taken.media_type.split("/", 1)[1] if "/" in taken.media_type else ""
            rows.append(
                InputMessage(
                    id=f"{message['id']}-image-{index}",
                    kind="image",
                    role="user",
                    image_format="" if subtype == "*" else subtype,
                    image_bytes=taken.value,
                    parent_message_id=message["id"],
                )
            )
        else:
            rows.append(
                InputMessage(
                    id=f"{message['id']}-document-{index}",
                    kind="document",
                    role="user",
                    content=taken.filename,
                    image_format=taken.media_type,
                    image_bytes=taken.value,
                    parent_message_id=message["id"],
                )
            )
    return rows


def new_turn_media_bytes(*, messages: list[Any]) -> int:
    """The decoded bytes of the data parts in the request's trailing user messages.

    The client re-sends the whole history with every turn: what came before the last message
    of another role was taken (and stored) by an earlier request, so only the new turn's own
    parts count against ``MAX_MEDIA_REQUEST_BYTES``. The body limit (``MAX_BODY_BYTES``) still
    bounds a request as a whole."""
    total = 0
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            break
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "binary" and isinstance(part.get("data"), str):
                total += decoded_size(value=part["data"])
            source = part.get("source")
            if (
                part.get("type") in MEDIA_PARTS
                and isinstance(source, dict)
                and source.get("type") == "data"
                and isinstance(source.get("value"), str)
            ):
                total += decoded_size(value=source["value"])
    return total
