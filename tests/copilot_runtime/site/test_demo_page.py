"""The demo chat page at ``/``."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


def test_the_page_is_served_with_its_runtime_url_and_a_csrf_cookie(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'const RUNTIME = "/api/copilotkit";' in page
    assert 'const AGENT = "default";' in page
    assert "/admin/conversations/thread/" in page
    assert "csrftoken" in response.cookies
    assert 'id="offline-notice"' in page


@override_settings(COPILOT_RUNTIME={"OPENAI_API_KEY": "sk-test"})
def test_the_offline_notice_goes_away_when_a_model_is_configured(client: Client) -> None:
    assert 'id="offline-notice"' not in client.get("/").content.decode()
