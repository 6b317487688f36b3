"""LangChain chat-model factories the adapter tests configure (``ADAPTER["factory"]``)."""

from __future__ import annotations

from typing import Any


def fake_chat_openai(*, base_url: str, model: str = "gpt-4o-mini") -> Any:
    """``langchain-openai``'s ChatOpenAI on the fake upstream, reporting usage when streaming.

    The runtime calls a factory once per event loop; the model gets an HTTP client of its own
    (langchain-openai otherwise shares one default client across loops, which fails on the
    second loop)."""
    import httpx
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=base_url,
        api_key="test",
        model=model,
        stream_usage=True,
        max_retries=0,
        http_async_client=httpx.AsyncClient(),
    )


def not_a_model() -> object:
    return object()
