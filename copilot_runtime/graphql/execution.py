"""The general GraphQL executor: any document against ``schema``, incremental or not.

    prepared = prepare_operation(query=..., variables=..., operation_name=...)
    if isinstance(prepared, list):          # syntax / validation / operation errors
        answer {"errors": prepared} (HTTP 200)
    result = await prepared.execute(context)
    if isinstance(result, dict):            # one result (queries, request errors, ...)
        answer it as JSON
    else:                                   # AsyncIterator of 2022-format payloads
        frame each payload with ``transport`` (multipart/mixed or SSE)

``prepared.is_incremental`` says up front whether the operation uses ``@defer``/``@stream``
(for content negotiation); ``execute`` may still return a single dict for it when nothing was
deferred in the end (a variable coercion error, the root field failing before returning).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import lru_cache
from inspect import isawaitable
from typing import Any

from graphql import (
    DocumentNode,
    ExecutionResult,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    parse,
    validate,
)
from graphql.execution import (
    ExperimentalIncrementalExecutionResults,
    experimental_execute_incrementally,
)
from strawberry.execution.is_awaitable import optimized_is_awaitable

from copilot_runtime.errors import ErrorCode, error_extensions
from copilot_runtime.fastlane.strawberry import graphql_core_schema
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.error_format import (
    UNEXPECTED_ERROR_MESSAGE,
    format_error,
    format_errors,
    request_error,
)
from copilot_runtime.graphql.incremental import legacy_payloads
from copilot_runtime.graphql.schema import schema
from copilot_runtime.graphql.validation import RUNTIME_RULES

logger = logging.getLogger("copilot_runtime.graphql")

__all__ = [
    "PreparedOperation",
    "format_error",
    "prepare_operation",
]

# The documents real clients send are a few hundred tokens and a few KB; these only stop abuse.
MAX_QUERY_TOKENS = 20_000
# Comments and whitespace are not tokens: the text is bounded too, which also bounds what the
# parse cache below can hold (PARSE_CACHE_SIZE x MAX_QUERY_CHARS of text, plus bounded ASTs).
MAX_QUERY_CHARS = 100_000
PARSE_CACHE_SIZE = 256

INCREMENTAL_DIRECTIVES = frozenset({"defer", "stream"})


@dataclass(frozen=True)
class _ParsedDocument:
    document: DocumentNode | None
    errors: tuple[GraphQLError, ...]
    # Operation name (None for an anonymous one) -> uses @defer/@stream.
    incremental_operations: dict[str | None, bool]


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse_and_validate(query: str) -> _ParsedDocument:
    """Parse and validate once per distinct query text (clients resend the same few)."""
    try:
        document = parse(query, max_tokens=MAX_QUERY_TOKENS, allow_empty_selection_sets=False)
    except GraphQLError as error:
        return _ParsedDocument(document=None, errors=(error,), incremental_operations={})
    # Kept whichever lane validated it: both schemas hold the very same types and directives.
    errors = validate(
        graphql_core_schema(schema), document, RUNTIME_RULES, allow_empty_selection_sets=False
    )
    if errors:
        return _ParsedDocument(document=None, errors=tuple(errors), incremental_operations={})
    fragments = {
        definition.name.value: definition
        for definition in document.definitions
        if isinstance(definition, FragmentDefinitionNode)
    }
    incremental_operations = {
        (definition.name.value if definition.name else None): _uses_incremental_delivery(
            definition.selection_set, fragments, set()
        )
        for definition in document.definitions
        if isinstance(definition, OperationDefinitionNode)
    }
    return _ParsedDocument(
        document=document, errors=(), incremental_operations=incremental_operations
    )


def _uses_incremental_delivery(
    selection_set: SelectionSetNode | None,
    fragments: dict[str, FragmentDefinitionNode],
    visited_fragments: set[str],
) -> bool:
    """Whether ``@defer``/``@stream`` appears anywhere below, following fragment spreads."""
    if selection_set is None:
        return False
    for selection in selection_set.selections:
        if _has_incremental_directive(selection):
            return True
        if isinstance(selection, FieldNode | InlineFragmentNode):
            if _uses_incremental_delivery(selection.selection_set, fragments, visited_fragments):
                return True
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            if name in visited_fragments or name not in fragments:
                continue
            visited_fragments.add(name)
            fragment = fragments[name]
            if _has_incremental_directive(fragment):
                return True
            if _uses_incremental_delivery(fragment.selection_set, fragments, visited_fragments):
                return True
    return False


def _has_incremental_directive(node: Any) -> bool:
    return any(
        directive.name.value in INCREMENTAL_DIRECTIVES for directive in node.directives or ()
    )


@dataclass(frozen=True)
class PreparedOperation:
    """A parsed, validated operation chosen from its document, ready to run."""

    document: DocumentNode
    operation: OperationDefinitionNode
    # The selected operation's own name (None for an anonymous operation).
    operation_name: str | None
    operation_type: str
    is_incremental: bool
    variables: dict[str, Any] | None

    async def execute(
        self, context: RuntimeContext
    ) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        """Run the operation: one result dict, or an async iterator of 2022-format payloads."""
        if self.operation_type == "subscription":
            return {"errors": [request_error("Subscriptions are served over the websocket.")]}
        try:
            result: Any = experimental_execute_incrementally(
                # Looked up per operation, not at import: the lane follows the settings.
                graphql_core_schema(schema),
                self.document,
                context_value=context,
                variable_values=self.variables,
                operation_name=self.operation_name,
                is_awaitable=optimized_is_awaitable,
            )
            if isawaitable(result):
                result = await result
        except Exception:
            # graphql-core reports resolver failures in the result; this is a bug of ours.
            logger.exception("GraphQL execution failed")
            return {"errors": [_unexpected_error()], "data": None}
        if isinstance(result, ExperimentalIncrementalExecutionResults):
            return legacy_payloads(result)
        return single_result(result)


def single_result(result: ExecutionResult) -> dict[str, Any]:
    """``{"errors"?, "data"?}`` for one result; a request error has no ``data`` at all."""
    payload: dict[str, Any] = {}
    if result.errors:
        payload["errors"] = format_errors(result.errors)
        is_request_error = result.data is None and all(e.path is None for e in result.errors)
        if not is_request_error:
            payload["data"] = result.data
    else:
        payload["data"] = result.data
    if result.extensions:
        payload["extensions"] = result.extensions
    return payload


def prepare_operation(
    *, query: str, variables: dict[str, Any] | None, operation_name: str | None
) -> PreparedOperation | list[dict[str, Any]]:
    """The operation to run, or the formatted errors that stop it (HTTP 200 with ``errors``)."""
    if not isinstance(query, str) or not query.strip():
        return [request_error("Must provide query string.")]
    if len(query) > MAX_QUERY_CHARS:
        return [request_error(f"The query is too long (over {MAX_QUERY_CHARS} characters).")]
    if variables is not None and not isinstance(variables, dict):
        return [request_error("Variables must be an object.")]
    operation_name = operation_name or None
    parsed = _parse_and_validate(query)
    if parsed.errors or parsed.document is None:
        return format_errors(parsed.errors)

    operation = _select_operation(parsed.document, operation_name)
    if isinstance(operation, str):
        return [request_error(operation)]
    selected_name = operation.name.value if operation.name else None
    return PreparedOperation(
        document=parsed.document,
        operation=operation,
        operation_name=selected_name,
        operation_type=operation.operation.value,
        is_incremental=parsed.incremental_operations.get(selected_name, False),
        variables=variables,
    )


def _select_operation(
    document: DocumentNode, operation_name: str | None
) -> OperationDefinitionNode | str:
    """The chosen operation, or the error message graphql-core would give."""
    operations = [
        definition
        for definition in document.definitions
        if isinstance(definition, OperationDefinitionNode)
    ]
    if operation_name is None:
        if len(operations) == 1:
            return operations[0]
        if not operations:
            return "Must provide an operation."
        return "Must provide operation name if query contains multiple operations."
    for operation in operations:
        if operation.name and operation.name.value == operation_name:
            return operation
    return f"Unknown operation named '{operation_name}'."


def _unexpected_error() -> dict[str, Any]:
    return {"message": UNEXPECTED_ERROR_MESSAGE, "extensions": error_extensions(ErrorCode.UNKNOWN)}
