"""A stored image or document row as the AG-UI content part it came in as: for the v2 client
replaying a thread and for AG-UI agents the history is forwarded to.

A payload holding ``://`` is an address (base64 never does); an image row's format is its
subtype (as v1 stores it), a document row's its full media type, with its file name."""

from __future__ import annotations

from typing import Any


def agui_media_part(*, kind: str, media_format: str, payload: str, filename: str) -> dict[str, Any]:
    is_image = kind == "image"
    media_type = f"image/{media_format or 'png'}" if is_image else media_format
    source_type = "url" if "://" in payload else "data"
    part: dict[str, Any] = {
        "type": "image" if is_image else "document",
        "source": {"type": source_type, "value": payload, "mimeType": media_type},
    }
    if not is_image:
        # AG-UI parts have no file name field: ``metadata`` carries it, as clients send it.
        part["metadata"] = {"filename": filename}
    return part
