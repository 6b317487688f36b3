"""Meta events (LangGraph interrupts) streamed in ``CopilotResponse.metaEvents``."""

from __future__ import annotations

import strawberry

from copilot_runtime.graphql.types.enums import MetaEventName
from copilot_runtime.graphql.types.messages import BaseMessageOutput

META_EVENT_TYPE = "MetaEvent"


@strawberry.interface
class BaseMetaEvent:
    name: MetaEventName

    @strawberry.field(name="type")
    def event_type(self) -> str:
        # Always the same string, as in the TypeScript runtime (`type = "MetaEvent"`).
        return META_EVENT_TYPE


@strawberry.type
class LangGraphInterruptEvent(BaseMetaEvent):
    name: MetaEventName = MetaEventName.LangGraphInterruptEvent
    value: str
    response: str | None = None


@strawberry.type
class CopilotKitLangGraphInterruptEventData:
    messages: list[BaseMessageOutput]
    value: str


@strawberry.type
class CopilotKitLangGraphInterruptEvent(BaseMetaEvent):
    name: MetaEventName = MetaEventName.CopilotKitLangGraphInterruptEvent
    data: CopilotKitLangGraphInterruptEventData
    response: str | None = None
