"""Attribute names: the OpenTelemetry GenAI semantic conventions, plus the runtime's own.

The GenAI names are used as the conventions spell them, so a span exported over OTLP reads
the same in any GenAI-aware backend (Langfuse, Phoenix, Grafana...). Names the conventions do
not cover are prefixed ``copilot.``; cost uses ``gen_ai.usage.cost``, the name Langfuse reads.
"""

from __future__ import annotations

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"

REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_STOP_SEQUENCES = "gen_ai.request.stop_sequences"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"

USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
USAGE_COST = "gen_ai.usage.cost"

TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
# Opt-in content (they may be sensitive): only set when content capture is on.
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"

ERROR_TYPE = "error.type"

# Operation names.
OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
OP_INVOKE_AGENT = "invoke_agent"

# The runtime's own.
RUN_ID = "copilot.run.id"
RUN_STATUS = "copilot.run.status"
ERROR_MESSAGE = "copilot.error.message"
REQUEST_TOOL_CHOICE = "copilot.request.tool_choice"
REQUEST_TOOLS_COUNT = "copilot.request.tools_count"
LIMIT_TRIPS = "copilot.limit_trips"
INTERRUPTS = "copilot.interrupts"
STATE_SNAPSHOTS = "copilot.agent_state.snapshots"
GENERATIONS = "copilot.generations"
TOOL_CALLS = "copilot.tool_calls"
CLOSED_BY = "copilot.span.closed_by"  # "run_end" when the flush closed a span left open
GUARDRAIL_PREFIX = "copilot.guardrail."
