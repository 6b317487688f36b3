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


def scripted_reasoning_model() -> Any:
    """A LangChain chat model streaming reasoning in the forms providers' integrations give
    it (DeepSeek's ``additional_kwargs``, Anthropic's ``thinking`` parts with and without the
    provider named), then text."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

    anthropic = {"model_provider": "anthropic"}
    script = [
        AIMessageChunk(content="", additional_kwargs={"reasoning_content": "One, "}),
        AIMessageChunk(content=[{"type": "thinking", "thinking": "two, ", "index": 0}]),
        AIMessageChunk(
            content=[{"type": "thinking", "thinking": "three.", "index": 0}],
            response_metadata=anthropic,
        ),
        AIMessageChunk(
            content=[{"type": "thinking", "signature": "SIG", "index": 0}],
            response_metadata=anthropic,
        ),
        AIMessageChunk(content=[{"type": "text", "text": "Done", "index": 1}]),
    ]

    class ScriptedReasoning(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, messages: Any, stop: Any = None, **kwargs: Any) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="Done"))])

        async def _astream(self, messages: Any, stop: Any = None, **kwargs: Any) -> Any:
            for chunk in script:
                yield ChatGenerationChunk(message=chunk)

    return ScriptedReasoning()


# What the recording model was sent, call by call (its messages as LangChain objects).
RECORDED: list[list[Any]] = []


def recording_anthropic_model() -> Any:
    """A LangChain chat model of langchain-anthropic's type (``anthropic-chat``) that records
    what it is sent and streams signed thinking, a redacted block, then text, and its usage
    as langchain-anthropic reports it (cache reads and writes counted in the input)."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

    script = [
        AIMessageChunk(content=[{"type": "thinking", "thinking": "Plan.", "index": 0}]),
        AIMessageChunk(content=[{"type": "thinking", "signature": "SIG", "index": 0}]),
        AIMessageChunk(content=[{"type": "redacted_thinking", "data": "ENC", "index": 1}]),
        AIMessageChunk(content=[{"type": "text", "text": "Done", "index": 2}]),
        AIMessageChunk(
            content="",
            usage_metadata={
                "input_tokens": 30,
                "output_tokens": 5,
                "total_tokens": 35,
                "input_token_details": {"cache_read": 10, "cache_creation": 8},
            },
        ),
    ]

    class RecordingAnthropic(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "anthropic-chat"

        def _generate(self, messages: Any, stop: Any = None, **kwargs: Any) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="Done"))])

        async def _astream(self, messages: Any, stop: Any = None, **kwargs: Any) -> Any:
            RECORDED.append(list(messages))
            for chunk in script:
                yield ChatGenerationChunk(message=chunk)

    return RecordingAnthropic()
