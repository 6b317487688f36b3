"""``format_error``: a GraphQLError as the client may see it.

- CopilotKit errors keep their message and carry the CopilotKit extensions (``code``,
  ``visibility``, ``severity``...), so the client routes them to a banner or a toast.
- Request errors (syntax, validation, variables, unknown operation: no ``path``) keep
  graphql-core's message, with ``BAD_REQUEST`` extensions.
- GraphQL errors raised while executing (non-null violations, deliberate ``GraphQLError``s)
  keep their message with ``UNKNOWN`` extensions (or their own, if they have some).
- Anything else is masked: a fixed message, ``UNKNOWN`` extensions, and the traceback goes to
  the server log (logger ``copilot_runtime.graphql``), never onto the wire.
"""

from __future__ import annotations

import logging
from typing import Any

from graphql import GraphQLError

from copilot_runtime.errors import CopilotKitError, ErrorCode, error_extensions

logger = logging.getLogger("copilot_runtime.graphql")

UNEXPECTED_ERROR_MESSAGE = "An unexpected error occurred. Please check the server logs."


def format_error(error: GraphQLError) -> dict[str, Any]:
    """``{"message", "locations"?, "path"?, "extensions"}`` for one error."""
    original = error.original_error
    # A GraphQLError re-located by graphql-core wraps the one the resolver raised.
    while isinstance(original, GraphQLError) and original.original_error is not None:
        original = original.original_error
    if isinstance(original, CopilotKitError):
        message, extensions = original.message, original.extensions()
    elif error.path is None:
        message, extensions = error.message, error_extensions(ErrorCode.BAD_REQUEST)
    elif original is None or isinstance(original, GraphQLError):
        message = error.message
        extensions = dict(error.extensions or {}) or error_extensions(ErrorCode.UNKNOWN)
        logger.warning("GraphQL execution error at %s: %s", error.path, message)
    else:
        message, extensions = UNEXPECTED_ERROR_MESSAGE, error_extensions(ErrorCode.UNKNOWN)
        logger.error(
            "Unexpected error while resolving %s",
            error.path,
            exc_info=(type(original), original, original.__traceback__),
        )

    formatted: dict[str, Any] = {"message": message}
    if error.locations:
        formatted["locations"] = [
            {"line": location.line, "column": location.column} for location in error.locations
        ]
    if error.path is not None:
        formatted["path"] = list(error.path)
    formatted["extensions"] = extensions
    return formatted


def format_errors(errors: list[GraphQLError] | tuple[GraphQLError, ...]) -> list[dict[str, Any]]:
    return [format_error(error) for error in errors]


def request_error(message: str) -> dict[str, Any]:
    """A formatted request-level error that graphql-core did not produce (no query, ...)."""
    return {"message": message, "extensions": error_extensions(ErrorCode.BAD_REQUEST)}
