"""An image stored as base64, served to the session inspector as its thumbnail.

Served from the admin's own origin (a page under ``img-src 'self'`` shows it) and never inlined
into the page (an image may be megabytes). Only raster formats are served, as the type they
claim, with sniffing off and a sandboxing policy: a client-sent "image" must not run as a page
of the admin (an SVG could carry script)."""

from __future__ import annotations

import base64
import binascii

from django.http import Http404, HttpResponse

from conversations.models import Message, MessageKind, Thread

THUMBNAIL_FORMATS = ("png", "jpeg", "jpg", "gif", "webp")


def thread_image_response(*, thread: Thread, message_pk: int) -> HttpResponse:
    message = (
        Message.objects.filter(thread=thread, pk=message_pk, kind=MessageKind.IMAGE)
        .only("image_format", "image_bytes")
        .first()
    )
    if message is None or message.image_format not in THUMBNAIL_FORMATS:
        raise Http404("No such image")
    try:
        data = base64.b64decode(message.image_bytes, validate=True)
    except (binascii.Error, ValueError) as error:
        raise Http404("The image is not base64") from error
    response = HttpResponse(data, content_type=f"image/{message.image_format}")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=3600"
    return response
