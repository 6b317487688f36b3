"""Input types of ``generateCopilotResponse`` and ``loadAgentState``.

Nullable fields default to ``UNSET`` (``None`` would print as an SDL default ``= null``,
which the contract does not have); the resolver turns an input into a plain dict with
``input_to_dict`` (see ``copilot_runtime.graphql.input_conversion``).
"""

from __future__ import annotations

import strawberry
from strawberry import UNSET

from copilot_runtime.graphql.types.enums import (
    ActionInputAvailability,
    CopilotRequestType,
    MessageRole,
    MetaEventName,
)
from copilot_runtime.graphql.types.scalars import DateTimeISO

SCOPE_DEPRECATION = "This field will be removed in a future version"


@strawberry.input
class ActionExecutionMessageInput:
    arguments: str
    name: str
    parent_message_id: str | None = UNSET
    scope: str | None = strawberry.field(default=UNSET, deprecation_reason=SCOPE_DEPRECATION)


@strawberry.input
class ActionInput:
    available: ActionInputAvailability | None = UNSET
    description: str
    json_schema: str
    name: str


@strawberry.input
class AgentSessionInput:
    agent_name: str
    node_name: str | None = UNSET
    thread_id: str | None = UNSET


@strawberry.input
class AgentStateInput:
    agent_name: str
    config: str | None = UNSET
    state: str


@strawberry.input
class AgentStateMessageInput:
    active: bool
    agent_name: str
    node_name: str
    role: MessageRole
    run_id: str
    running: bool
    state: str
    thread_id: str


@strawberry.input
class GuardrailsRuleInput:
    allow_list: list[str] | None = strawberry.field(default_factory=list)
    deny_list: list[str] | None = strawberry.field(default_factory=list)


@strawberry.input
class GuardrailsInput:
    input_validation_rules: GuardrailsRuleInput


@strawberry.input
class CloudInput:
    guardrails: GuardrailsInput | None = UNSET


@strawberry.input
class CopilotContextInput:
    description: str
    value: str


@strawberry.input
class OpenAIApiAssistantAPIInput:
    run_id: str | None = UNSET
    thread_id: str | None = UNSET


@strawberry.input
class ExtensionsInput:
    openai_assistant_api: OpenAIApiAssistantAPIInput | None = strawberry.field(
        default=UNSET, name="openaiAssistantAPI"
    )


@strawberry.input
class ForwardedParametersInput:
    max_tokens: float | None = UNSET
    model: str | None = UNSET
    stop: list[str] | None = UNSET
    temperature: float | None = UNSET
    tool_choice: str | None = UNSET
    tool_choice_function_name: str | None = UNSET


@strawberry.input
class FrontendInput:
    actions: list[ActionInput]
    to_deprecate_full_context: str | None = strawberry.field(
        default=UNSET, name="toDeprecate_fullContext"
    )
    url: str | None = UNSET


@strawberry.input
class ImageMessageInput:
    bytes: str
    format: str
    parent_message_id: str | None = UNSET
    role: MessageRole


@strawberry.input
class ResultMessageInput:
    action_execution_id: str
    action_name: str
    parent_message_id: str | None = UNSET
    result: str


@strawberry.input
class TextMessageInput:
    content: str
    parent_message_id: str | None = UNSET
    role: MessageRole


@strawberry.input
class MessageInput:
    action_execution_message: ActionExecutionMessageInput | None = UNSET
    agent_state_message: AgentStateMessageInput | None = UNSET
    created_at: DateTimeISO
    id: str
    image_message: ImageMessageInput | None = UNSET
    result_message: ResultMessageInput | None = UNSET
    text_message: TextMessageInput | None = UNSET


@strawberry.input
class MetaEventInput:
    messages: list[MessageInput] | None = UNSET
    name: MetaEventName
    response: str | None = UNSET
    value: str


@strawberry.input
class GenerateCopilotResponseMetadataInput:
    request_type: CopilotRequestType | None = UNSET


@strawberry.input
class GenerateCopilotResponseInput:
    agent_session: AgentSessionInput | None = UNSET
    agent_state: AgentStateInput | None = UNSET
    agent_states: list[AgentStateInput] | None = UNSET
    cloud: CloudInput | None = UNSET
    context: list[CopilotContextInput] | None = UNSET
    extensions: ExtensionsInput | None = UNSET
    forwarded_parameters: ForwardedParametersInput | None = UNSET
    frontend: FrontendInput
    messages: list[MessageInput]
    meta_events: list[MetaEventInput] | None = UNSET
    metadata: GenerateCopilotResponseMetadataInput
    run_id: str | None = UNSET
    thread_id: str | None = UNSET


@strawberry.input
class LoadAgentStateInput:
    agent_name: str
    thread_id: str
