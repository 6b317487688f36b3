"""The GraphQL schema: CopilotKit runtime 1.10.6's contract, with ``@defer``/``@stream``.

Execute documents through ``copilot_runtime.graphql.execution`` (2022 incremental format),
not strawberry's views: strawberry's own incremental payloads break urql's ``@stream`` merge.
"""

from __future__ import annotations

import strawberry
from strawberry.schema.config import StrawberryConfig

from copilot_runtime.graphql.naming import NAME_CONVERTER
from copilot_runtime.graphql.resolvers.agents import (
    resolve_available_agents,
    resolve_load_agent_state,
)
from copilot_runtime.graphql.resolvers.copilot import resolve_generate_copilot_response
from copilot_runtime.graphql.types.agents import AgentsResponse, LoadAgentStateResponse
from copilot_runtime.graphql.types.messages import MESSAGE_OUTPUT_TYPES
from copilot_runtime.graphql.types.meta_events import (
    CopilotKitLangGraphInterruptEvent,
    LangGraphInterruptEvent,
)
from copilot_runtime.graphql.types.responses import CopilotResponse
from copilot_runtime.graphql.types.scalars import SCALAR_MAP
from copilot_runtime.graphql.types.statuses import (
    FailedResponseStatus,
    PendingResponseStatus,
    SuccessResponseStatus,
)

HELLO = "Hello World"


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


schema = strawberry.Schema(
    query=Query,
    mutation=Mutation,
    # Implementations reached only through interfaces must be listed to exist in the schema.
    types=[
        *MESSAGE_OUTPUT_TYPES,
        LangGraphInterruptEvent,
        CopilotKitLangGraphInterruptEvent,
        SuccessResponseStatus,
        FailedResponseStatus,
        PendingResponseStatus,
    ],
    config=StrawberryConfig(
        name_converter=NAME_CONVERTER,
        enable_experimental_incremental_execution=True,
        scalar_map=SCALAR_MAP,
    ),
)
