"""Choosing the model adapter in settings: per runtime and per agent, every kind checked."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from agents.registry import agent_get
from agents.turns import check_agent_runnable
from copilot_runtime.adapters import adapter_from_settings, adapter_spec_for
from copilot_runtime.adapters.kinds import AdapterSettingError, adapter_spec_check
from copilot_runtime.errors import CopilotKitError


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "gemini"}, "unknown adapter kind 'gemini'"),
        ({"kind": "openai", "modle": "x"}, "has no option 'modle'"),
        ({"kind": "azure", "endpoint": "https://x"}, "needs 'deployment'"),
        ({"kind": "langchain"}, "needs 'factory'"),
        ("openai", "must be a dict"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_naming_the_problem(spec: Any, message: str) -> None:
    with pytest.raises(AdapterSettingError, match=message):
        adapter_spec_check(spec)


def test_without_adapter_the_openai_settings_decide() -> None:
    with override_settings(COPILOT_RUNTIME={"OPENAI_API_KEY": "", "MODEL_ADAPTER": "auto"}):
        assert adapter_spec_for(None) == {"kind": "demo"}
    with override_settings(COPILOT_RUNTIME={"OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}):
        spec = adapter_spec_for(None)
    assert spec["kind"] == "openai" and spec["api_key"] == "k" and spec["model"] == "m"


def test_an_agent_may_run_on_its_own_adapter() -> None:
    conf = {
        "ADAPTER": {"kind": "demo"},
        "AGENTS": {
            "writer": {
                "kind": "llm",
                "instructions": "Write.",
                "adapter": {"kind": "anthropic", "api_key": "k", "model": "claude-x"},
            },
            "plain": {"kind": "llm", "instructions": "Plain."},
        },
    }
    with override_settings(COPILOT_RUNTIME=conf):
        assert adapter_spec_for("writer")["kind"] == "anthropic"
        assert adapter_spec_for("plain") == {"kind": "demo"}
        assert adapter_spec_for(None) == {"kind": "demo"}


async def test_adapters_are_built_once_per_setting() -> None:
    conf = {"ADAPTER": {"kind": "openai", "api_key": "k", "base_url": "http://127.0.0.1:9/v1"}}
    with override_settings(COPILOT_RUNTIME=conf):
        first = adapter_from_settings()
        assert adapter_from_settings() is first
        assert first.name == "openai" and first.provider == "openai.chat"


def test_without_a_model_plain_chat_is_a_configuration_error() -> None:
    with (
        override_settings(COPILOT_RUNTIME={"ADAPTER": {"kind": "none"}}),
        pytest.raises(CopilotKitError, match="none is configured") as raised,
    ):
        check_agent_runnable(agent_get("default"))
    assert raised.value.code == "CONFIGURATION_ERROR"


def test_a_misconfigured_adapter_refuses_the_turn_before_it_starts() -> None:
    with (
        override_settings(COPILOT_RUNTIME={"ADAPTER": {"kind": "anthropik"}}),
        pytest.raises(CopilotKitError, match="ADAPTER: unknown adapter kind"),
    ):
        check_agent_runnable(agent_get("default"))


def test_in_a_host_project_the_model_falls_back_to_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://models.local/v1")
    monkeypatch.setenv("OPENAI_MODEL", "gpt-env")
    with override_settings(COPILOT_RUNTIME={}):
        spec = adapter_spec_for(None)
    assert (spec["kind"], spec["api_key"], spec["base_url"], spec["model"]) == (
        "openai",
        "sk-env",
        "http://models.local/v1",
        "gpt-env",
    )
    # COPILOT_RUNTIME wins over the environment.
    conf = {"OPENAI_API_KEY": "sk-conf", "OPENAI_MODEL": "gpt-conf"}
    with override_settings(COPILOT_RUNTIME=conf):
        spec = adapter_spec_for(None)
    assert (spec["api_key"], spec["model"]) == ("sk-conf", "gpt-conf")
