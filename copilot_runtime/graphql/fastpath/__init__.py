"""The dedicated encoder for the client's fixed ``generateCopilotResponse`` document.

Generic GraphQL execution per streamed item is too slow for the hot path, so the one
document every CopilotKit client sends is recognised (by its canonical print) and answered
straight from the run's events. Every other document still goes through the general executor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from graphql import GraphQLError, OperationDefinitionNode, print_ast
from graphql.execution.values import get_variable_values

from copilot_runtime.errors import CopilotKitError
from copilot_runtime.fastlane.strawberry import graphql_core_schema
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.error_format import format_error, format_errors
from copilot_runtime.graphql.execution import PreparedOperation
from copilot_runtime.graphql.fastpath.documents import client_mutation_printed
from copilot_runtime.graphql.fastpath.encoder import ROOT, V1Encoder, initial_payload
from copilot_runtime.graphql.fastpath.variables import plain_client_variables
from copilot_runtime.graphql.input_conversion import coerced_to_plain
from copilot_runtime.graphql.resolvers.generate import cancel_on_disconnect, start_v1_turn
from copilot_runtime.graphql.schema import schema
from copilot_runtime.graphql.turn_input import v1_history
from copilot_runtime.history import BodyRead
from copilot_runtime.runs.start import StartedTurn

FastHandler = Callable[..., Awaitable[dict[str, Any] | AsyncIterator[dict[str, Any]]]]

# id(document) -> (document, is the client's mutation); documents come from a parse cache.
_MATCHES: dict[int, tuple[Any, bool]] = {}


def _is_client_mutation(prepared: PreparedOperation) -> bool:
    document = prepared.document
    cached = _MATCHES.get(id(document))
    if cached is not None and cached[0] is document:
        return cached[1]
    matches = print_ast(document) == client_mutation_printed()
    if len(_MATCHES) > 256:
        _MATCHES.clear()
    _MATCHES[id(document)] = (document, matches)
    return matches


def match_fast_operation(prepared: PreparedOperation) -> FastHandler | None:
    if prepared.operation_type != "mutation" or not _is_client_mutation(prepared):
        return None

    async def handle(
        *, context: RuntimeContext, variables: dict[str, Any], read: BodyRead | None = None
    ) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        return await serve_client_mutation(prepared=prepared, context=context, read=read)

    return handle


def _operation(prepared: PreparedOperation) -> OperationDefinitionNode:
    return next(
        definition
        for definition in prepared.document.definitions
        if isinstance(definition, OperationDefinitionNode)
    )


async def serve_client_mutation(
    *, prepared: PreparedOperation, context: RuntimeContext, read: BodyRead | None = None
) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
    """``read``: the front door's reading of the request's bytes (its history)."""
    variables = prepared.variables or {}
    user = context.user
    owner_id = user.pk if user.is_authenticated else None
    # The history enters before the check: what the parse made of it before was checked then.
    history = v1_history(variables.get("data"), owner_id, read)
    plain = plain_client_variables(variables, history)
    if plain is None:
        # Not the usual shape: graphql-core coerces it (and words the errors).
        coerced = get_variable_values(
            graphql_core_schema(schema),
            _operation(prepared).variable_definitions,
            prepared.variables or {},
        )
        if isinstance(coerced, list):
            return {"errors": format_errors(coerced)}
        values = coerced.coerced
        plain = coerced_to_plain(values["data"]), coerced_to_plain(values.get("properties"))
    data, properties = plain
    try:
        started, request = await start_v1_turn(
            context=context, data=data, properties=properties, history=history
        )
    except CopilotKitError as error:
        located = GraphQLError(error.message, path=[ROOT], original_error=error)
        return {"errors": [format_error(located)], "data": None}
    return _payloads(started, extensions=request.extensions)


async def _payloads(
    started: StartedTurn, *, extensions: dict[str, Any] | None
) -> AsyncIterator[dict[str, Any]]:
    encoder = V1Encoder()
    inbox = started.events
    finished = False
    try:
        yield initial_payload(
            thread_id=started.thread_id, run_id=started.run_id, extensions=extensions
        )
        while not finished:
            batch = await inbox.take()
            ended = batch[-1] is None
            events = [event for event in batch if event is not None]
            entries, finished = encoder.encode(events)
            if entries:
                yield {"incremental": entries, "hasNext": not finished}
            if ended and not finished:
                yield {"hasNext": False}
                finished = True
    finally:
        if not finished:
            await cancel_on_disconnect(started)
        started.detach()
