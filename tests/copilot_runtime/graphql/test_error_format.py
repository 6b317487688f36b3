"""format_error: what reaches the client, and what only reaches the log."""

from __future__ import annotations

import logging

import pytest
from graphql import GraphQLError

from copilot_runtime.errors import AgentNotFoundError, ErrorCode, error_extensions
from copilot_runtime.graphql.error_format import UNEXPECTED_ERROR_MESSAGE, format_error


def test_copilotkit_error_keeps_message_and_extensions() -> None:
    original = AgentNotFoundError("ghost")
    error = GraphQLError(original.message, path=["loadAgentState"], original_error=original)
    assert format_error(error) == {
        "message": original.message,
        "path": ["loadAgentState"],
        "extensions": original.extensions(),
    }


def test_request_error_is_bad_request() -> None:
    formatted = format_error(GraphQLError("Variable '$data' of required type was not provided."))
    assert formatted == {
        "message": "Variable '$data' of required type was not provided.",
        "extensions": error_extensions(ErrorCode.BAD_REQUEST),
    }


def test_unexpected_error_is_masked_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    try:
        raise ZeroDivisionError("secret ratio")
    except ZeroDivisionError as exc:
        original = exc
    error = GraphQLError("secret ratio", path=["a", 0], original_error=original)
    with caplog.at_level(logging.ERROR, logger="copilot_runtime.graphql"):
        formatted = format_error(error)
    assert formatted == {
        "message": UNEXPECTED_ERROR_MESSAGE,
        "path": ["a", 0],
        "extensions": error_extensions(ErrorCode.UNKNOWN),
    }
    [record] = caplog.records
    assert record.exc_info is not None and record.exc_info[1] is original
    assert "ZeroDivisionError" in caplog.text


def test_graphql_execution_error_keeps_its_message() -> None:
    error = GraphQLError("Cannot return null for non-nullable field Query.hello.", path=["hello"])
    formatted = format_error(error)
    assert formatted["message"] == "Cannot return null for non-nullable field Query.hello."
    assert formatted["extensions"]["code"] == "UNKNOWN"


def test_wrapped_copilotkit_error_is_found() -> None:
    original = AgentNotFoundError("ghost")
    inner = GraphQLError(original.message, original_error=original)
    outer = GraphQLError(inner.message, path=["generateCopilotResponse"], original_error=inner)
    assert format_error(outer)["extensions"]["code"] == "AGENT_NOT_FOUND"
