"""The agent registry: ``default`` always first, configured agents, stable ids."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from agents.registry import DEFAULT_AGENT_NAME, agent_get, agent_list
from copilot_runtime.errors import AgentNotFoundError, ErrorCode

# The namespace agent ids are derived in. It must never change: clients keep agent ids, and
# every process (web, worker) must answer the same ones.
AGENT_ID_NAMESPACE = uuid.UUID("6f1d9a52-3c1e-4d5b-9a0e-0c7b1f2e8d41")

CONFIGURED = {
    "AGENTS": {
        "zeta": {"description": "Last by name", "kind": "python", "module": "my.agents.zeta"},
        "alpha": {"description": "First by name"},
        "bare": None,
    }
}


def test_default_is_there_without_configuration() -> None:
    with override_settings(COPILOT_RUNTIME={}):
        agents = agent_list()

    assert [a.name for a in agents] == [DEFAULT_AGENT_NAME]
    assert agents[0].kind == "chat"
    assert agents[0].description


@override_settings(COPILOT_RUNTIME=CONFIGURED)
def test_default_comes_first_then_configured_agents_by_name() -> None:
    assert [a.name for a in agent_list()] == ["default", "alpha", "bare", "zeta"]


@override_settings(COPILOT_RUNTIME=CONFIGURED)
def test_configured_agents_keep_their_description_kind_and_options() -> None:
    zeta = agent_get("zeta")
    alpha = agent_get("alpha")
    bare = agent_get("bare")

    assert (zeta.description, zeta.kind, zeta.options) == (
        "Last by name",
        "python",
        {"module": "my.agents.zeta"},
    )
    assert (alpha.description, alpha.kind, alpha.options) == ("First by name", "python", {})
    assert (bare.description, bare.kind, bare.options) == ("", "python", {})


@override_settings(COPILOT_RUNTIME=CONFIGURED)
def test_listing_agents_does_not_consume_the_configuration() -> None:
    agent_list()
    agent_list()

    assert agent_get("zeta").description == "Last by name"
    assert CONFIGURED["AGENTS"]["zeta"]["description"] == "Last by name"


@override_settings(
    COPILOT_RUNTIME={"AGENTS": {"default": {"description": "hijack", "kind": "python"}}}
)
def test_a_configured_default_tunes_the_chat_engine_but_cannot_replace_it() -> None:
    agents = agent_list()

    assert [a.name for a in agents] == ["default"]
    assert agents[0].kind == "chat"
    assert agents[0].description == "hijack"
    assert "kind" not in agents[0].options


@override_settings(COPILOT_RUNTIME=CONFIGURED)
def test_agent_ids_are_stable_uuid5s_of_their_names() -> None:
    first = {a.name: a.id for a in agent_list()}
    second = {a.name: a.id for a in agent_list()}

    assert first == second
    assert first["default"] == str(uuid.uuid5(AGENT_ID_NAMESPACE, "default"))
    assert first["zeta"] == str(uuid.uuid5(AGENT_ID_NAMESPACE, "zeta"))
    assert len(set(first.values())) == len(first)


def test_an_unknown_agent_is_agent_not_found() -> None:
    with pytest.raises(AgentNotFoundError) as caught:
        agent_get("no-such-agent")

    error = caught.value
    assert error.code == ErrorCode.AGENT_NOT_FOUND
    assert error.extensions()["code"] == "AGENT_NOT_FOUND"
    assert error.agent_name == "no-such-agent"
    assert "no-such-agent" in error.message


def test_the_list_follows_the_settings_and_the_announcements_it_was_built_from() -> None:
    from agents.registry import AgentSpec, announced_agents_replace

    with override_settings(COPILOT_RUNTIME=CONFIGURED):
        first = agent_list()
        first.clear()  # a caller's copy: the next lookup is whole again
        assert [a.name for a in agent_list()] == ["default", "alpha", "bare", "zeta"]
        announced_agents_replace(
            {"remote-one": AgentSpec(name="remote-one", description="", kind="remote")}
        )
        try:
            assert [a.name for a in agent_list()][-1] == "remote-one"
        finally:
            announced_agents_replace({})
        assert [a.name for a in agent_list()] == ["default", "alpha", "bare", "zeta"]
    with override_settings(COPILOT_RUNTIME={"AGENTS": {"solo": {}}}):
        assert [a.name for a in agent_list()] == ["default", "solo"]
