"""``CopilotResponse``: what ``generateCopilotResponse`` returns.

``status`` is awaited from ``status_source`` (the client defers it); ``messages`` and
``metaEvents`` are async generators over their sources so ``@stream`` delivers each item as
the engine produces it.
"""

from __future__ import annotations

from typing import Any

import strawberry

from copilot_runtime.graphql.types.messages import BaseMessageOutput
from copilot_runtime.graphql.types.meta_events import BaseMetaEvent
from copilot_runtime.graphql.types.sources import iterate_source, settle_source
from copilot_runtime.graphql.types.statuses import ResponseStatus


@strawberry.type
class OpenAIApiAssistantAPIResponse:
    run_id: str | None = None
    thread_id: str | None = None


@strawberry.type
class ExtensionsResponse:
    openai_assistant_api: OpenAIApiAssistantAPIResponse | None = strawberry.field(
        default=None, name="openaiAssistantAPI"
    )


@strawberry.type
class CopilotResponse:
    thread_id: str
    run_id: str | None = None
    extensions: ExtensionsResponse | None = None
    # Awaitable[ResponseStatus] | ResponseStatus
    status_source: strawberry.Private[Any]
    # AsyncIterable[BaseMessageOutput] | Iterable[BaseMessageOutput]
    messages_source: strawberry.Private[Any]
    # AsyncIterable[BaseMetaEvent] | Iterable[BaseMetaEvent]
    meta_events_source: strawberry.Private[Any] = ()

    @strawberry.field
    async def status(self) -> ResponseStatus:
        return await settle_source(self, "status_source")

    @strawberry.field
    async def messages(self) -> strawberry.Streamable[BaseMessageOutput]:
        async for message in iterate_source(self.messages_source):
            yield message

    @strawberry.field(name="metaEvents")
    async def meta_events(self) -> strawberry.Streamable[BaseMetaEvent] | None:
        async for event in iterate_source(self.meta_events_source):
            yield event
