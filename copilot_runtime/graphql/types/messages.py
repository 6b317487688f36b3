"""Output messages (``BaseMessageOutput`` and its five implementations).

Streamed parts (``content``, ``arguments``) and deferred parts (``status``) are read from
private ``*_source`` fields: a list or an async iterable for chunks, a value or an awaitable
for the status (see ``sources``). ``content`` and ``arguments`` are async generators so that
``@stream`` delivers each chunk as it arrives; without ``@stream`` they complete as lists.
"""

from __future__ import annotations

from typing import Any

import strawberry

from copilot_runtime.graphql.types.enums import MessageRole
from copilot_runtime.graphql.types.inputs import SCOPE_DEPRECATION
from copilot_runtime.graphql.types.scalars import DateTimeISO
from copilot_runtime.graphql.types.sources import iterate_source, settle_source
from copilot_runtime.graphql.types.statuses import MessageStatus


@strawberry.interface
class BaseMessageOutput:
    id: str
    created_at: DateTimeISO
    # Awaitable[MessageStatus] | MessageStatus
    status_source: strawberry.Private[Any]

    @strawberry.field
    async def status(self) -> MessageStatus:
        return await settle_source(self, "status_source")


@strawberry.type
class TextMessageOutput(BaseMessageOutput):
    role: MessageRole
    parent_message_id: str | None = None
    # AsyncIterable[str] | Iterable[str]
    content_source: strawberry.Private[Any]

    @strawberry.field
    async def content(self) -> strawberry.Streamable[str]:
        async for chunk in iterate_source(self.content_source):
            yield chunk


@strawberry.type
class ActionExecutionMessageOutput(BaseMessageOutput):
    name: str
    parent_message_id: str | None = None
    scope: str | None = strawberry.field(default=None, deprecation_reason=SCOPE_DEPRECATION)
    # AsyncIterable[str] | Iterable[str]
    arguments_source: strawberry.Private[Any]

    @strawberry.field
    async def arguments(self) -> strawberry.Streamable[str]:
        async for chunk in iterate_source(self.arguments_source):
            yield chunk


@strawberry.type
class ResultMessageOutput(BaseMessageOutput):
    action_execution_id: str
    action_name: str
    result: str


@strawberry.type
class AgentStateMessageOutput(BaseMessageOutput):
    thread_id: str
    agent_name: str
    node_name: str
    run_id: str
    active: bool
    role: MessageRole
    # JSON text, as the client parses it itself.
    state: str
    running: bool


@strawberry.type
class ImageMessageOutput(BaseMessageOutput):
    format: str
    bytes: str
    role: MessageRole
    parent_message_id: str | None = None


MESSAGE_OUTPUT_TYPES: tuple[type[BaseMessageOutput], ...] = (
    TextMessageOutput,
    ActionExecutionMessageOutput,
    ResultMessageOutput,
    AgentStateMessageOutput,
    ImageMessageOutput,
)

__all__ = [
    "MESSAGE_OUTPUT_TYPES",
    "ActionExecutionMessageOutput",
    "AgentStateMessageOutput",
    "BaseMessageOutput",
    "ImageMessageOutput",
    "ResultMessageOutput",
    "TextMessageOutput",
]
