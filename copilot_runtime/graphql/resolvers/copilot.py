"""``generateCopilotResponse``: hands the request, as plain dicts, to the generate resolver.

The streaming logic lives in ``resolvers.generate`` (imported on call); this layer only
converts strawberry inputs so that module never sees GraphQL types.
"""

from __future__ import annotations

import importlib
from typing import Any

import strawberry
from strawberry import UNSET

from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.input_conversion import input_to_dict
from copilot_runtime.graphql.types.inputs import GenerateCopilotResponseInput
from copilot_runtime.graphql.types.responses import CopilotResponse
from copilot_runtime.graphql.types.scalars import JSONObject

GENERATE_MODULE = "copilot_runtime.graphql.resolvers.generate"


async def resolve_generate_copilot_response(
    info: strawberry.Info[RuntimeContext, None],
    data: GenerateCopilotResponseInput,
    properties: JSONObject | None = UNSET,
) -> CopilotResponse:
    generate: Any = importlib.import_module(GENERATE_MODULE)
    return await generate.resolve_generate_copilot_response(
        context=info.context,
        data=input_to_dict(data),
        properties=properties if properties is not UNSET else None,
    )
