"""The GraphQL schema: CopilotKit runtime 1.10.6's contract, with ``@defer``/``@stream``.

Execute documents through ``copilot_runtime.graphql.execution`` (2022 incremental format),
not strawberry's views: strawberry's own incremental payloads break urql's ``@stream`` merge.
"""

from __future__ import annotations

import logging

import strawberry
from graphql import GraphQLError
from strawberry.extensions import AddValidationRules
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from copilot_runtime.errors import CopilotKitError
from copilot_runtime.graphql.naming import NAME_CONVERTER
from copilot_runtime.graphql.resolvers.agents import (
    resolve_available_agents,
    resolve_load_agent_state,
)
from copilot_runtime.graphql.resolvers.generate import resolve_generate_copilot_response
from copilot_runtime.graphql.resolvers.stop import resolve_stop_run
from copilot_runtime.graphql.resolvers.subscriptions import (
    resolve_copilot_stream,
    resolve_run_events,
)
from copilot_runtime.graphql.types.agents import AgentsResponse, LoadAgentStateResponse
from copilot_runtime.graphql.types.messages import MESSAGE_OUTPUT_TYPES
from copilot_runtime.graphql.types.meta_events import (
    CopilotKitLangGraphInterruptEvent,
    LangGraphInterruptEvent,
)
from copilot_runtime.graphql.types.responses import CopilotResponse
from copilot_runtime.graphql.types.run_events import RunEventPayload
from copilot_runtime.graphql.types.scalars import SCALAR_MAP
from copilot_runtime.graphql.types.statuses import (
    FailedResponseStatus,
    PendingResponseStatus,
    SuccessResponseStatus,
)
from copilot_runtime.graphql.validation import OneTurnPerOperation

HELLO = "Hello World"

logger = logging.getLogger("copilot_runtime.graphql")


def resolve_hello() -> str:
    return HELLO


@strawberry.type
class Query:
    hello: str = strawberry.field(resolver=resolve_hello)
    available_agents: AgentsResponse = strawberry.field(resolver=resolve_available_agents)
    load_agent_state: LoadAgentStateResponse = strawberry.field(resolver=resolve_load_agent_state)


@strawberry.type
class Mutation:
    generate_copilot_response: CopilotResponse = strawberry.mutation(
        resolver=resolve_generate_copilot_response
    )
    stop_run: bool = strawberry.mutation(
        resolver=resolve_stop_run,
        description=(
            "Stop a run wherever it executes; what it produced so far stays. True when this "
            "call stopped it, false when it had already ended."
        ),
    )


@strawberry.type
class Subscription:
    """Served over the websocket at /api/copilotkit (graphql-transport-ws or graphql-ws)."""

    copilot_stream: RunEventPayload = strawberry.subscription(
        resolver=resolve_copilot_stream,
        description=(
            "Start a turn, as generateCopilotResponse does, and stream its events. Completing "
            "the subscription stops the run; a dropped connection does not (re-attach with "
            "runEvents)."
        ),
    )
    run_events: RunEventPayload = strawberry.subscription(
        resolver=resolve_run_events,
        description=(
            "Attach to a running or finished run: its logged events after afterSequence "
            "(default 0, the whole run), then live ones until the run finishes."
        ),
    )


class RuntimeSchema(strawberry.Schema):
    """Logs errors the client is meant to see (NOT_FOUND, THREAD_BUSY...) briefly; only the
    unexpected ones get a traceback (``error_format`` logs those when it masks them)."""

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        for error in errors:
            if isinstance(error.original_error, CopilotKitError):
                logger.info("GraphQL error %s: %s", error.original_error.code, error.message)
            elif error.original_error is None:
                logger.info("GraphQL request error: %s", error.message)
            else:
                super().process_errors([error], execution_context)


schema = RuntimeSchema(
    query=Query,
    mutation=Mutation,
    subscription=Subscription,
    # Implementations reached only through interfaces must be listed to exist in the schema.
    types=[
        *MESSAGE_OUTPUT_TYPES,
        LangGraphInterruptEvent,
        CopilotKitLangGraphInterruptEvent,
        SuccessResponseStatus,
        FailedResponseStatus,
        PendingResponseStatus,
    ],
    # Documents served by strawberry (the websocket) get the runtime's own rules too. A factory,
    # not an instance: strawberry builds its extensions afresh for each operation (an instance
    # shared between operations is deprecated).
    extensions=[lambda: AddValidationRules([OneTurnPerOperation])],
    config=StrawberryConfig(
        name_converter=NAME_CONVERTER,
        enable_experimental_incremental_execution=True,
        scalar_map=SCALAR_MAP,
    ),
)
