"""``runtime_settings()``: defaults, then the project's ``COPILOT_RUNTIME``, then the env."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.test import override_settings

from copilot_runtime.checks import check_runtime_settings
from copilot_runtime.conf import (
    DEFAULTS,
    anonymous_allowed,
    apply_process_settings,
    disconnect_policy,
    runtime_setting,
    runtime_settings,
)
from copilot_runtime.history import HISTORIES


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No stray ``COPILOT_RUNTIME_*`` variables; no cached settings before or after."""
    for name in list(os.environ):
        if name.startswith("COPILOT_RUNTIME_"):
            monkeypatch.delenv(name)
    runtime_settings.cache_clear()
    yield
    monkeypatch.undo()
    runtime_settings.cache_clear()


def fresh() -> dict[str, object]:
    runtime_settings.cache_clear()
    return runtime_settings()


@override_settings(COPILOT_RUNTIME={})
def test_defaults_apply_when_the_project_sets_nothing() -> None:
    assert fresh() == DEFAULTS
    assert runtime_setting("MAX_BODY_BYTES") == 10 * 1024 * 1024
    assert runtime_setting("EXECUTOR") == "inline"
    assert disconnect_policy("graphql") == "cancel"
    assert disconnect_policy("subscription") == "continue"
    assert disconnect_policy("agui") == "continue"
    assert runtime_setting("AGENTS") == {}


@override_settings(COPILOT_RUNTIME={"ON_DISCONNECT": {"graphql": "continue"}})
def test_a_partial_disconnect_policy_keeps_the_other_surfaces_defaults() -> None:
    assert disconnect_policy("graphql") == "continue"
    assert disconnect_policy("subscription") == "continue"


@override_settings(COPILOT_RUNTIME={"ON_DISCONNECT": "cancel"})
def test_a_plain_disconnect_policy_applies_everywhere() -> None:
    assert disconnect_policy("subscription") == "cancel"


@override_settings(COPILOT_RUNTIME={"MAX_ITERATIONS": 3, "EXECUTOR": "celery"})
def test_the_projects_dict_overrides_defaults() -> None:
    merged = fresh()

    assert merged["MAX_ITERATIONS"] == 3
    assert merged["EXECUTOR"] == "celery"
    assert merged["ON_DISCONNECT"] == DEFAULTS["ON_DISCONNECT"]


@override_settings(COPILOT_RUNTIME={"MAX_ITERATIONS": 3})
def test_the_environment_overrides_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_RUNTIME_MAX_ITERATIONS", "7")

    assert fresh()["MAX_ITERATIONS"] == 7


def test_environment_values_are_parsed_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_RUNTIME_AGENTS", '{"planner": {"description": "Plans"}}')
    monkeypatch.setenv("COPILOT_RUNTIME_OPENAI_TIMEOUT_SECONDS", "12.5")
    monkeypatch.setenv("COPILOT_RUNTIME_ON_BEFORE_REQUEST", "null")

    merged = fresh()

    assert merged["AGENTS"] == {"planner": {"description": "Plans"}}
    assert merged["OPENAI_TIMEOUT_SECONDS"] == 12.5
    assert merged["ON_BEFORE_REQUEST"] is None


def test_environment_strings_stay_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_RUNTIME_ON_DISCONNECT", "continue")
    monkeypatch.setenv("COPILOT_RUNTIME_OPENAI_BASE_URL", "http://127.0.0.1:9999/v1")

    merged = fresh()

    assert merged["ON_DISCONNECT"] == "continue"
    assert merged["OPENAI_BASE_URL"] == "http://127.0.0.1:9999/v1"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("https://a.example, https://b.example", ["https://a.example", "https://b.example"]),
        ("https://a.example", ["https://a.example"]),
        ('["https://a.example", "https://b.example"]', ["https://a.example", "https://b.example"]),
        (" , ", []),
    ],
)
def test_list_settings_accept_comma_separated_values(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: list[str]
) -> None:
    monkeypatch.setenv("COPILOT_RUNTIME_CORS_ALLOWED_ORIGINS", raw)

    assert fresh()["CORS_ALLOWED_ORIGINS"] == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("false", False), ("yes", True), ("no", False), ("on", True), ("off", False)],
)
def test_boolean_settings_accept_the_usual_spellings(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool
) -> None:
    monkeypatch.setenv("COPILOT_RUNTIME_ALLOW_ANONYMOUS", raw)

    assert fresh()["ALLOW_ANONYMOUS"] is expected


@pytest.mark.parametrize(("raw", "truthy"), [("1", True), ("0", False)])
def test_boolean_settings_accept_digits(
    monkeypatch: pytest.MonkeyPatch, raw: str, truthy: bool
) -> None:
    monkeypatch.setenv("COPILOT_RUNTIME_ALLOW_ANONYMOUS", raw)

    assert bool(fresh()["ALLOW_ANONYMOUS"]) is truthy


def test_settings_are_cached_until_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    before = runtime_setting("MAX_ITERATIONS")
    monkeypatch.setenv("COPILOT_RUNTIME_MAX_ITERATIONS", str(before + 5))

    assert runtime_setting("MAX_ITERATIONS") == before
    runtime_settings.cache_clear()
    assert runtime_setting("MAX_ITERATIONS") == before + 5


def test_override_settings_clears_the_cache() -> None:
    original = runtime_setting("MAX_ITERATIONS")

    with override_settings(COPILOT_RUNTIME={"MAX_ITERATIONS": original + 41}):
        assert runtime_setting("MAX_ITERATIONS") == original + 41

    assert runtime_setting("MAX_ITERATIONS") == original


@pytest.mark.parametrize(("debug", "allowed"), [(True, True), (False, False)])
def test_anonymous_callers_are_allowed_only_while_debug_is_on_by_default(
    monkeypatch: pytest.MonkeyPatch, debug: bool, allowed: bool
) -> None:
    # The suite allows anonymous callers by default (tests/conftest.py); the product does not.
    monkeypatch.setitem(DEFAULTS, "ALLOW_ANONYMOUS", None)
    with override_settings(COPILOT_RUNTIME={}, DEBUG=debug):
        fresh()
        assert anonymous_allowed() is allowed
    with override_settings(COPILOT_RUNTIME={"ALLOW_ANONYMOUS": True}, DEBUG=False):
        fresh()
        assert anonymous_allowed() is True
    runtime_settings.cache_clear()


def test_the_remembered_messages_bound_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's bound on the history messages it remembers (copilot_runtime/history)
    follows REMEMBERED_MESSAGES, from the project's dict or the environment; a smaller bound
    lets the oldest histories go at once."""
    for thread in ("conf-a", "conf-b", "conf-c"):
        HISTORIES.enter("test", [{"id": f"{thread}-1"}], thread=(None, thread))

    with override_settings(COPILOT_RUNTIME={"REMEMBERED_MESSAGES": 2}):
        assert HISTORIES.size == 2
        assert HISTORIES.messages == 2
        assert HISTORIES.of_thread((None, "conf-a")) is None
        assert HISTORIES.of_thread((None, "conf-c")) is not None

    assert HISTORIES.size == DEFAULTS["REMEMBERED_MESSAGES"]
    monkeypatch.setenv("COPILOT_RUNTIME_REMEMBERED_MESSAGES", "8192")
    runtime_settings.cache_clear()
    apply_process_settings()
    assert HISTORIES.size == 8192
    monkeypatch.delenv("COPILOT_RUNTIME_REMEMBERED_MESSAGES")
    runtime_settings.cache_clear()
    apply_process_settings()
    assert HISTORIES.size == DEFAULTS["REMEMBERED_MESSAGES"]


def test_a_malformed_bound_is_left_to_the_system_checks() -> None:
    """Applied when the app starts: a wrong value must not crash the start-up with a
    traceback; ``manage.py check`` names it."""
    with override_settings(COPILOT_RUNTIME={"REMEMBERED_MESSAGES": "lots"}):
        assert HISTORIES.size == DEFAULTS["REMEMBERED_MESSAGES"]
        found = [error.msg for error in check_runtime_settings()]
        assert any("REMEMBERED_MESSAGES" in message for message in found)
    with override_settings(COPILOT_RUNTIME="not a dict"):
        assert HISTORIES.size == DEFAULTS["REMEMBERED_MESSAGES"]
    for value in (float("inf"), float("nan")):
        with override_settings(COPILOT_RUNTIME={"REMEMBERED_MESSAGES": value}):
            assert HISTORIES.size == DEFAULTS["REMEMBERED_MESSAGES"]


def test_a_bound_from_the_environment_that_is_no_number_does_not_stop_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for raw in ("lots", "1e999"):  # the second parses as an infinite float
        monkeypatch.setenv("COPILOT_RUNTIME_REMEMBERED_MESSAGES", raw)
        runtime_settings.cache_clear()
        apply_process_settings()
        assert HISTORIES.size == DEFAULTS["REMEMBERED_MESSAGES"]


def test_a_process_serving_both_protocols_remembers_at_most_the_bound() -> None:
    """The v1 and v2 histories share REMEMBERED_MESSAGES: the newer protocol's push out the
    older ones."""
    from benchmarks.client_request import request_variables
    from copilot_runtime.agui.run_input import agui_history, run_input_parse
    from copilot_runtime.graphql.turn_input import parse_generate_input, v1_history

    v1_data = request_variables(thread_id="both-v1", tokens=3)["data"]
    first = v1_data["messages"][0]
    v1_data["messages"] = [
        {**first, "id": f"both-v1-{index}", "textMessage": {**first["textMessage"]}}
        for index in range(3)
    ]
    v2_body = {
        "threadId": "both-v2",
        "runId": "both-run",
        "tools": [],
        "context": [],
        "messages": [
            {"id": f"both-v2-{index}", "role": "user", "content": "hi"} for index in range(3)
        ],
    }
    with override_settings(COPILOT_RUNTIME={"REMEMBERED_MESSAGES": 4}):
        parse_generate_input(v1_data, None, v1_history(v1_data, None))
        assert HISTORIES.of_thread((None, "both-v1")) is not None
        run_input_parse(v2_body, agui_history(v2_body, None))

        assert HISTORIES.messages == 3
        assert HISTORIES.of_thread((None, "both-v1")) is None
        assert HISTORIES.of_thread((None, "both-v2")) is not None
