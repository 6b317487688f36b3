"""The converter from graphql-core 3.3 payloads to the 2022 format, on hand-built payloads.

Covers what the CopilotKit document rarely triggers: ``subPath``, a failed deferred group,
labels, and payloads that carry nothing for the client.
"""

from __future__ import annotations

from graphql import GraphQLError
from graphql.execution import (
    CompletedResult,
    IncrementalDeferResult,
    IncrementalStreamResult,
    InitialIncrementalExecutionResult,
    PendingResult,
    SubsequentIncrementalExecutionResult,
)

from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.graphql.error_format import UNEXPECTED_ERROR_MESSAGE
from copilot_runtime.graphql.incremental import LegacyIncrementalFormatter


def test_sub_path_is_appended_to_the_pending_path() -> None:
    formatter = LegacyIncrementalFormatter()
    initial = formatter.initial(
        InitialIncrementalExecutionResult(
            data={"a": {"b": {}}},
            pending=[PendingResult("0", ["a"], label="outer")],
            has_next=True,
        )
    )
    assert initial == {"data": {"a": {"b": {}}}, "hasNext": True}
    payload = formatter.subsequent(
        SubsequentIncrementalExecutionResult(
            has_next=False,
            incremental=[IncrementalDeferResult({"c": 1}, "0", sub_path=["b"])],
            completed=[CompletedResult("0")],
        )
    )
    assert payload == {"incremental": [{"data": {"c": 1}, "path": ["a", "b"]}], "hasNext": False}


def test_stream_announced_inside_deferred_data_starts_at_its_list_length() -> None:
    formatter = LegacyIncrementalFormatter()
    formatter.initial(
        InitialIncrementalExecutionResult(
            data={"r": {}}, pending=[PendingResult("0", ["r"])], has_next=True
        )
    )
    # The deferred data brings a list with two items already, then its stream is announced.
    first = formatter.subsequent(
        SubsequentIncrementalExecutionResult(
            has_next=True,
            incremental=[IncrementalDeferResult({"list": ["x", "y"]}, "0")],
            completed=[CompletedResult("0")],
            pending=[PendingResult("1", ["r", "list"])],
        )
    )
    assert first == {
        "incremental": [{"data": {"list": ["x", "y"]}, "path": ["r"]}],
        "hasNext": True,
    }
    second = formatter.subsequent(
        SubsequentIncrementalExecutionResult(
            has_next=True, incremental=[IncrementalStreamResult(["z"], "1")]
        )
    )
    third = formatter.subsequent(
        SubsequentIncrementalExecutionResult(
            has_next=True, incremental=[IncrementalStreamResult(["w", "v"], "1")]
        )
    )
    assert second == {"incremental": [{"items": ["z"], "path": ["r", "list", 2]}], "hasNext": True}
    assert third == {
        "incremental": [{"items": ["w", "v"], "path": ["r", "list", 3]}],
        "hasNext": True,
    }


def test_nothing_to_say_is_skipped_but_the_end_is_sent() -> None:
    formatter = LegacyIncrementalFormatter()
    formatter.initial(
        InitialIncrementalExecutionResult(
            data={"l": []}, pending=[PendingResult("0", ["l"])], has_next=True
        )
    )
    assert (
        formatter.subsequent(
            SubsequentIncrementalExecutionResult(has_next=True, completed=[CompletedResult("0")])
        )
        is None
    )
    assert formatter.subsequent(SubsequentIncrementalExecutionResult(has_next=False)) == {
        "hasNext": False
    }


def test_failed_deferred_group_becomes_an_errors_entry_with_masked_errors() -> None:
    formatter = LegacyIncrementalFormatter()
    formatter.initial(
        InitialIncrementalExecutionResult(
            data={"r": {}},
            pending=[PendingResult("0", ["r"]), PendingResult("1", ["r"])],
            has_next=True,
        )
    )
    leaked = GraphQLError("boom", path=["r", "x"], original_error=KeyError("secret-key"))
    known = GraphQLError(
        "busy",
        path=["r", "y"],
        original_error=CopilotKitError("Thread is busy", code=ErrorCode.THREAD_BUSY),
    )
    payload = formatter.subsequent(
        SubsequentIncrementalExecutionResult(
            has_next=False,
            completed=[CompletedResult("0", [leaked]), CompletedResult("1", [known])],
        )
    )
    assert payload is not None
    first, second = payload["incremental"]
    assert first["path"] == ["r"] and second["path"] == ["r"]
    assert first["errors"][0]["message"] == UNEXPECTED_ERROR_MESSAGE
    assert "secret-key" not in str(payload)
    assert second["errors"][0]["message"] == "Thread is busy"
    assert second["errors"][0]["extensions"]["code"] == "THREAD_BUSY"
    assert payload["hasNext"] is False


def test_item_errors_stay_with_their_items() -> None:
    formatter = LegacyIncrementalFormatter()
    formatter.initial(
        InitialIncrementalExecutionResult(
            data={"l": ["a"]}, pending=[PendingResult("0", ["l"])], has_next=True
        )
    )
    item_error = GraphQLError("Cannot return null", path=["l", 1])
    payload = formatter.subsequent(
        SubsequentIncrementalExecutionResult(
            has_next=True, incremental=[IncrementalStreamResult([None], "0", errors=[item_error])]
        )
    )
    assert payload is not None
    [entry] = payload["incremental"]
    assert entry["items"] == [None] and entry["path"] == ["l", 1]
    assert entry["errors"][0]["message"] == "Cannot return null"
    assert entry["errors"][0]["path"] == ["l", 1]
