"""Where the OpenAI-compatible adapter sends its requests, resolved as the openai package does."""

from __future__ import annotations

import pytest

from copilot_runtime.adapters.openai_adapter import DEFAULT_BASE_URL, openai_endpoint


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


def test_the_given_base_url_wins_and_the_key_is_a_bearer_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://elsewhere/v1")

    url, headers = openai_endpoint(api_key="sk-1", base_url="http://127.0.0.1:8000/v1/")

    assert url == "http://127.0.0.1:8000/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-1"


def test_without_a_base_url_the_environment_then_openai_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert openai_endpoint(api_key="k", base_url=None)[0] == (
        DEFAULT_BASE_URL + "/chat/completions"
    )
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.local/v1")
    assert openai_endpoint(api_key="k", base_url="")[0] == "http://proxy.local/v1/chat/completions"


def test_the_organisation_and_project_headers_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert "OpenAI-Organization" not in openai_endpoint(api_key="k", base_url=None)[1]
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-1")

    headers = openai_endpoint(api_key="k", base_url=None)[1]

    assert headers["OpenAI-Organization"] == "org-1"
    assert headers["OpenAI-Project"] == "proj-1"
