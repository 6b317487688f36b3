"""Azure OpenAI: the deployment URL and key header are what the openai package's Azure client
sends, and a turn streams through them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from openai import AzureOpenAI

from copilot_runtime.adapters.azure import azure_endpoint, azure_openai_adapter
from copilot_runtime.adapters.base import ModelRequest, TextChunk
from copilot_runtime.adapters.kinds import AdapterSettingError

ENDPOINT = "https://acme.openai.azure.com"
DEPLOYMENT = "gpt4o prod"
VERSION = "2024-10-21"


@pytest.fixture(autouse=True)
def _no_azure_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)


def what_the_official_client_sends() -> httpx.Request:
    captured: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        return httpx.Response(500, json={"error": {"message": "captured"}})

    client = AzureOpenAI(
        api_key="azure-key",
        azure_endpoint=ENDPOINT,
        azure_deployment=DEPLOYMENT,
        api_version=VERSION,
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(answer)),
    )
    with pytest.raises(Exception, match="captured"):
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hi"}], stream=True
        )
    return captured[0]


def test_the_url_and_key_header_match_the_openai_packages_azure_client() -> None:
    official = what_the_official_client_sends()

    url, headers = azure_endpoint(
        api_key="azure-key", endpoint=ENDPOINT + "/", deployment=DEPLOYMENT, api_version=VERSION
    )

    assert httpx.URL(url) == official.url
    assert headers["api-key"] == official.headers["api-key"]
    assert "Authorization" not in headers


def test_missing_options_come_from_the_clients_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(AdapterSettingError, match="'api_key', 'endpoint', 'api_version'"):
        azure_endpoint(api_key="", endpoint="", deployment="d", api_version="")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "from-env")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", ENDPOINT)
    monkeypatch.setenv("OPENAI_API_VERSION", VERSION)
    url, headers = azure_endpoint(api_key="", endpoint="", deployment="d", api_version="")
    assert url == f"{ENDPOINT}/openai/deployments/d/chat/completions?api-version={VERSION}"
    assert headers["api-key"] == "from-env"


async def test_a_turn_streams_from_the_deployment(fake_upstream: Any) -> None:
    # The fake serves any path ending in /chat/completions: the deployment URL reaches it.
    root = fake_upstream.base_url.removesuffix("/v1")
    adapter = azure_openai_adapter(
        api_key="azure-key",
        endpoint=root,
        deployment="dep",
        api_version=VERSION,
        model="dep",
        timeout=5,
        max_retries=0,
        system_role="auto",
    )
    fake_upstream.script({"text": "Hello from Azure"})
    chunks = [
        chunk
        async for chunk in adapter.stream(
            ModelRequest(
                messages=[
                    {"role": "system", "content": "Be brief"},
                    {"role": "user", "content": "Hi"},
                ]
            )
        )
    ]

    assert "".join(c.delta for c in chunks if isinstance(c, TextChunk)) == "Hello from Azure"
    assert adapter.provider == "azure.chat"
    # Azure is not OpenAI's own host: instructions go as system (older deployments refuse
    # developer).
    assert fake_upstream.requests()[-1]["messages"][0]["role"] == "system"
