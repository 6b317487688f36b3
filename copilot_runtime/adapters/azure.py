"""Azure OpenAI: the OpenAI-compatible adapter on a deployment's URL with Azure's key header.

Azure serves the chat completions API at ``{endpoint}/openai/deployments/{deployment}/chat/
completions?api-version=...`` and takes the key in an ``api-key`` header. The ``openai``
package's ``AzureOpenAI`` client builds exactly that (tests/copilot_runtime/adapters checks the
two agree); it is not used at run time, for the reason the OpenAI adapter does without it
(its HTTP pipeline's cost per request, and its import's memory). Missing options fall back to
the environment variables that client reads: ``AZURE_OPENAI_API_KEY``,
``AZURE_OPENAI_ENDPOINT`` and ``OPENAI_API_VERSION``.
"""

from __future__ import annotations

import os
from urllib.parse import quote, urlencode

from copilot_runtime.adapters.errors import AdapterSettingError
from copilot_runtime.adapters.openai_adapter import OpenAIAdapter


def azure_endpoint(
    *, api_key: str, endpoint: str, deployment: str, api_version: str
) -> tuple[str, dict[str, str]]:
    """The deployment's chat completions URL and the headers Azure expects."""
    key = api_key or os.environ.get("AZURE_OPENAI_API_KEY", "")
    root = (endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT", "")).rstrip("/")
    version = api_version or os.environ.get("OPENAI_API_VERSION", "")
    missing = [
        name
        for name, value in (("api_key", key), ("endpoint", root), ("api_version", version))
        if not value
    ]
    if missing:
        raise AdapterSettingError(
            f"The azure adapter needs {', '.join(map(repr, missing))} (in its setting or from "
            "AZURE_OPENAI_API_KEY, AZURE_OPENAI_ENDPOINT, OPENAI_API_VERSION)."
        )
    url = f"{root}/openai/deployments/{quote(deployment, safe='')}/chat/completions?" + urlencode(
        {"api-version": version}
    )
    return url, {"api-key": key, "Accept": "application/json"}


def azure_openai_adapter(
    *,
    api_key: str,
    endpoint: str,
    deployment: str,
    api_version: str,
    model: str,
    timeout: float,
    max_retries: int,
    system_role: str,
) -> OpenAIAdapter:
    adapter = OpenAIAdapter(
        api_key=api_key,
        base_url=None,
        model=model,
        timeout=timeout,
        max_retries=max_retries,
        # Older deployments refuse ``developer``; auto sends ``system`` to any host but OpenAI's.
        system_role=system_role,
        endpoint=azure_endpoint(
            api_key=api_key, endpoint=endpoint, deployment=deployment, api_version=api_version
        ),
    )
    adapter.name = "azure"
    adapter.provider = "azure.chat"
    return adapter
