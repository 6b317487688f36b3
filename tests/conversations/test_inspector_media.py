"""The session inspector's images and documents: a thumbnail for an image stored as data (served
by the admin, raster formats only) or by URL, and a document's file name and type."""

from __future__ import annotations

import base64
import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.conversations.factories import message_row, thread_create
from tests.conversations.test_inspector import staff_client

pytestmark = pytest.mark.django_db

# A 1x1 transparent PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
CAT_URL = "https://example.com/cat.png"


def test_images_get_thumbnails_and_documents_their_name_and_type(admin_client: Client) -> None:
    thread = thread_create()
    data_image = message_row(
        thread=thread, position=0, kind="image", role="user", image_format="png", image_bytes=PNG
    )
    message_row(
        thread=thread,
        position=1,
        kind="image",
        role="user",
        image_format="png",
        image_bytes=CAT_URL,
    )
    svg = message_row(
        thread=thread,
        position=2,
        kind="image",
        role="user",
        image_format="svg+xml",
        image_bytes=base64.b64encode(b"<svg onload='alert(1)'/>").decode(),
    )
    message_row(
        thread=thread,
        position=3,
        kind="document",
        role="user",
        content="q3-report.pdf",
        image_format="application/pdf",
        image_bytes=base64.b64encode(b"%PDF-1.4").decode(),
    )
    message_row(
        thread=thread,
        position=4,
        kind="document",
        role="user",
        content="linked.pdf",
        image_format="application/pdf",
        image_bytes="https://example.com/linked.pdf",
    )
    page = admin_client.get(reverse("admin:conversations_thread_inspect", args=[thread.pk]))
    html = page.content.decode()

    image_url = reverse("admin:conversations_thread_image", args=[thread.pk, data_image.pk])
    thumbnails = re.findall(r'<img class="ins-thumb" src="([^"]+)"', html)
    assert thumbnails == [image_url, CAT_URL]
    assert 'referrerpolicy="no-referrer"' in html
    assert "Image (svg+xml)" in html
    assert re.search(r"Document <strong[^>]*>q3-report.pdf</strong> \(application/pdf\)", html)
    assert re.search(r"Document <strong[^>]*>linked.pdf</strong> \(application/pdf\)", html)
    assert PNG not in html  # the base64 is never inlined into the page

    served = admin_client.get(image_url)
    assert served.status_code == 200
    assert served["Content-Type"] == "image/png"
    assert served["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in served["Content-Security-Policy"]
    assert served.content == base64.b64decode(PNG)

    # An SVG could run script on the admin's origin: never served.
    not_raster = reverse("admin:conversations_thread_image", args=[thread.pk, svg.pk])
    assert admin_client.get(not_raster).status_code == 404
    # Another thread's image is not reachable through this thread.
    other = thread_create()
    elsewhere = reverse("admin:conversations_thread_image", args=[other.pk, data_image.pk])
    assert admin_client.get(elsewhere).status_code == 404


def test_the_image_needs_the_view_message_permission() -> None:
    thread = thread_create()
    image = message_row(
        thread=thread, position=0, kind="image", role="user", image_format="png", image_bytes=PNG
    )
    url = reverse("admin:conversations_thread_image", args=[thread.pk, image.pk])
    assert staff_client("view_thread").get(url).status_code == 403
    assert staff_client("view_thread", "view_message").get(url).status_code == 200
