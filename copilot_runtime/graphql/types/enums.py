"""The contract's enums. Member names are the GraphQL (wire) names, and so are the values."""

from __future__ import annotations

from enum import Enum

import strawberry


@strawberry.enum(description="The availability of the frontend action")
class ActionInputAvailability(Enum):
    disabled = "disabled"
    enabled = "enabled"
    remote = "remote"


@strawberry.enum(description="The type of Copilot request")
class CopilotRequestType(Enum):
    Chat = "Chat"
    Suggestion = "Suggestion"
    Task = "Task"
    TextareaCompletion = "TextareaCompletion"
    TextareaPopover = "TextareaPopover"


@strawberry.enum
class FailedResponseStatusReason(Enum):
    GUARDRAILS_VALIDATION_FAILED = "GUARDRAILS_VALIDATION_FAILED"
    MESSAGE_STREAM_INTERRUPTED = "MESSAGE_STREAM_INTERRUPTED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@strawberry.enum(description="The role of the message")
class MessageRole(Enum):
    assistant = "assistant"
    developer = "developer"
    system = "system"
    tool = "tool"
    user = "user"


@strawberry.enum
class MessageStatusCode(Enum):
    Failed = "Failed"
    Pending = "Pending"
    Success = "Success"


@strawberry.enum(description="Meta event types")
class MetaEventName(Enum):
    CopilotKitLangGraphInterruptEvent = "CopilotKitLangGraphInterruptEvent"
    LangGraphInterruptEvent = "LangGraphInterruptEvent"


@strawberry.enum
class ResponseStatusCode(Enum):
    Failed = "Failed"
    Pending = "Pending"
    Success = "Success"
