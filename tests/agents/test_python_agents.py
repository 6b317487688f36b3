"""Python agents and the built-in LLM agent, run through the engine like any turn: their
events persisted, their state kept (with history), interrupts paused and resumed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import AgentState, Message, RunStatus, Thread, ThreadStatus
from conversations.selectors import thread_pending_interrupt
from copilot_runtime.errors import AgentNotFoundError, CopilotKitError, ErrorCode
from copilot_runtime.events import (
    ActionResult,
    AgentStateSnapshot,
    MetaEvent,
    RunError,
    TextStart,
)
from copilot_runtime.graphql.agent_state import agent_state_load
from copilot_runtime.runs.start import turn_prepare
from tests.support.agent_turns import (
    agent_request,
    run_turn,
    streamed_text,
    text,
)
from tests.support.python_agents import RecordingAgent

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS = {
    "counter": {"kind": "python", "class": "agents.examples.CounterAgent"},
    "recorder": {
        "kind": "python",
        "class": "tests.support.python_agents.RecordingAgent",
        "colour": "blue",
    },
    "broken": {"kind": "python", "class": "tests.support.python_agents.BrokenAgent"},
    "tooling": {"kind": "python", "class": "tests.support.python_agents.ToolUsingAgent"},
    "support": {
        "kind": "llm",
        "instructions": "You are the support agent. Be brief.",
        "model": "support-model-1",
        "tools": ["serverAdd"],
    },
    "summarizer": {
        "kind": "python",
        "class": "agents.examples.SummarizerAgent",
        "instructions": "Summarise in one line.",
    },
}


@pytest.fixture
def agents_on_fake(fake_upstream) -> Iterator[None]:
    RecordingAgent.seen.clear()
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "ACTIONS": ["tests.support.actions.server_add", "tests.support.actions.always_fails"],
            "EVENT_FLUSH_MS": 5,
            "AGENTS": AGENTS,
        }
    ):
        yield


async def test_a_python_agent_streams_and_keeps_its_state(agents_on_fake) -> None:
    events, run = await run_turn(agent_request("counter", [text("u1", "hello")]))

    assert run.status == RunStatus.SUCCEEDED
    assert run.agent_name == "counter"
    assert streamed_text(events) == "This is turn 1 of this thread. Say 'reset' to start over."
    snapshot = next(e for e in events if isinstance(e, AgentStateSnapshot))
    assert (snapshot.agent_name, snapshot.thread_id, snapshot.state) == (
        "counter",
        "agent-thread",
        {"count": 1},
    )

    # The next turn starts from the persisted state (the client sent none).
    reply = next(e for e in events if isinstance(e, TextStart))
    history = [
        text("u1", "hello"),
        text(reply.message_id, streamed_text(events), role="assistant"),
        text("u2", "again"),
    ]
    events, _ = await run_turn(agent_request("counter", history))
    assert "turn 2" in streamed_text(events)
    history = [
        s.state async for s in AgentState.objects.filter(agent_name="counter").order_by("id")
    ]
    assert history == [{"count": 1}, {"count": 2}]

    loaded = await sync_to_async(agent_state_load)(
        thread_id="agent-thread", agent_name="counter", user=AnonymousUser()
    )
    assert loaded.thread_exists and loaded.state == {"count": 2}
    assert [m.get("content") for m in loaded.messages] == [
        "hello",
        "This is turn 1 of this thread. Say 'reset' to start over.",
        "again",
        "This is turn 2 of this thread. Say 'reset' to start over.",
    ]


async def test_the_state_the_client_sends_wins_over_the_stored_one(agents_on_fake) -> None:
    await run_turn(agent_request("counter", [text("u1", "hello")]))

    events, _ = await run_turn(
        agent_request(
            "counter",
            [text("u1", "hello"), text("u2", "again")],
            agent_states=[{"agentName": "counter", "state": json.dumps({"count": 41})}],
        )
    )

    assert "turn 42" in streamed_text(events)


@pytest.mark.parametrize(
    ("count", "turn"),
    [
        ("41", 42),  # its digits in a string still count
        ("²", 1),  # a digit to str.isdigit, refused by int(): the count starts over
        ("9" * 5000, 1),  # past int()'s 4,300 digits
    ],
)
async def test_a_count_in_the_clients_state_that_is_no_count_starts_over(
    agents_on_fake, count: str, turn: int
) -> None:
    await run_turn(agent_request("counter", [text("u1", "hello")]))

    events, run = await run_turn(
        agent_request(
            "counter",
            [text("u1", "hello"), text("u2", "again")],
            agent_states=[{"agentName": "counter", "state": json.dumps({"count": count})}],
        )
    )

    assert not [event for event in events if isinstance(event, RunError)]
    assert run.status == RunStatus.SUCCEEDED
    assert f"This is turn {turn} of this thread." in streamed_text(events)


async def test_an_interrupt_pauses_the_run_and_its_answer_resumes_the_agent(
    agents_on_fake,
) -> None:
    await run_turn(agent_request("counter", [text("u1", "hello")]))
    history = [text("u1", "hello"), text("u2", "reset")]

    events, run = await run_turn(agent_request("counter", history))

    (interrupt,) = [e for e in events if isinstance(e, MetaEvent)]
    assert interrupt.name == "LangGraphInterruptEvent"
    assert json.loads(interrupt.value) == {"question": "Reset the counter (now 1)?"}
    assert run.status == RunStatus.INTERRUPTED
    thread = await Thread.objects.aget(thread_id="agent-thread")
    assert thread.status == ThreadStatus.INTERRUPTED
    # Persisted: a reloaded page can still answer it.
    pending = await sync_to_async(thread_pending_interrupt)(thread_pk=thread.pk)
    assert [(p["name"], p["value"]) for p in pending] == [
        ("LangGraphInterruptEvent", interrupt.value)
    ]

    # The answer (without the interrupt's value, as a reloaded page may send it) resumes.
    events, run = await run_turn(
        agent_request(
            "counter",
            history,
            meta_events=[{"name": "LangGraphInterruptEvent", "response": "yes"}],
        )
    )

    assert streamed_text(events) == "The counter is reset to 0."
    assert run.status == RunStatus.SUCCEEDED
    thread = await Thread.objects.aget(thread_id="agent-thread")
    assert thread.status == ThreadStatus.IDLE
    assert await sync_to_async(thread_pending_interrupt)(thread_pk=thread.pk) == []
    latest = await AgentState.objects.filter(agent_name="counter").alatest("id")
    assert latest.state == {"count": 0}


async def test_the_agent_sees_messages_state_actions_and_the_answer(agents_on_fake) -> None:
    await run_turn(agent_request("counter", [text("u0", "reset")]))  # leaves an interrupt
    say_hello = {
        "name": "sayHello",
        "description": "Say hello.",
        "jsonSchema": json.dumps({"type": "object", "properties": {}}),
        "available": "enabled",
    }

    await run_turn(
        agent_request(
            "recorder",
            [text("s1", "be nice", role="system"), text("u1", "hi")],
            actions=[say_hello],
            properties={"tenant": "acme"},
            agent_states=[{"agentName": "recorder", "state": json.dumps({"mood": "good"})}],
            meta_events=[{"name": "LangGraphInterruptEvent", "value": '"v"', "response": "no"}],
        )
    )

    (seen,) = RecordingAgent.seen
    assert seen["options"] == {
        "class": "tests.support.python_agents.RecordingAgent",
        "colour": "blue",
    }
    assert seen["messages"] == [("text", "system", "be nice"), ("text", "user", "hi")]
    assert seen["model_messages"] == [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "hi"},
    ]
    assert seen["state"] == {"mood": "good"}
    assert seen["frontend_actions"] == ["sayHello"]
    assert seen["server_actions"] == ["always_fails", "serverAdd"]
    assert seen["properties"] == {"tenant": "acme"}
    assert (seen["resume"].response, seen["resume"].value) == ("no", '"v"')
    assert [p.name for p in seen["pending"]] == ["LangGraphInterruptEvent"]


async def test_another_callers_thread_of_the_same_id_is_not_the_one_waiting_on_an_interrupt(
    agents_on_fake, user
) -> None:
    """Client thread ids are per owner: a signed-in caller's thread "agent-thread" is not the
    anonymous one that waits on an interrupt, so its agent sees no pending interrupt there."""
    await run_turn(agent_request("counter", [text("u0", "reset")]))  # leaves an interrupt

    await run_turn(
        agent_request(
            "recorder",
            [text("u1", "hi")],
            meta_events=[{"name": "LangGraphInterruptEvent", "response": "no"}],
        ),
        user=user,
    )

    (seen,) = RecordingAgent.seen
    assert seen["pending"] == []
    assert await Thread.objects.filter(thread_id="agent-thread").acount() == 2


async def test_a_python_agent_runs_server_actions_and_calls_frontend_actions(
    agents_on_fake,
) -> None:
    events, run = await run_turn(agent_request("tooling", [text("u1", "go")]))

    assert run.status == RunStatus.SUCCEEDED
    (result,) = [e for e in events if isinstance(e, ActionResult)]
    assert (result.action_name, json.loads(result.result)) == ("serverAdd", {"sum": 5})
    rows = [
        (m.kind, m.action_name)
        async for m in Message.objects.filter(thread__thread_id="agent-thread")
        .exclude(kind="text")
        .order_by("position")
    ]
    assert rows == [
        ("action_execution", "serverAdd"),
        ("result", "serverAdd"),
        ("action_execution", "sayHello"),
    ]


async def test_a_failing_agent_fails_the_run_without_leaking_and_keeps_its_output(
    agents_on_fake,
) -> None:
    events, run = await run_turn(agent_request("broken", [text("u1", "go")]))

    assert run.status == RunStatus.FAILED
    assert run.error_code == "AGENT_ERROR"
    error = next(e for e in events if isinstance(e, RunError))
    assert "broken" in error.message and "ValueError" in error.message
    assert "secret" not in error.message
    partial = await Message.objects.aget(thread__thread_id="agent-thread", role="assistant")
    assert (partial.content, partial.status) == ("half a sent", "failed")


async def test_the_llm_agent_is_the_chat_engine_with_its_instructions_model_and_tools(
    agents_on_fake, fake_upstream
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}}]},
        {"text": "Three."},
    )

    events, run = await run_turn(agent_request("support", [text("u1", "add 1 and 2")]))

    assert run.status == RunStatus.SUCCEEDED
    assert streamed_text(events) == "Three."
    first, second = fake_upstream.requests()
    assert first["model"] == "support-model-1"
    assert first["messages"][0] == {
        "role": "system",
        "content": "You are the support agent. Be brief.",
    }
    assert [t["function"]["name"] for t in first["tools"]] == ["serverAdd"]
    assert second["messages"][-1]["role"] == "tool"
    # The instructions are the agent's, not the conversation's: never stored.
    stored = [m.role async for m in Message.objects.filter(thread__thread_id="agent-thread")]
    assert "system" not in stored


async def test_a_python_agent_can_run_a_chat_turn_itself(agents_on_fake, fake_upstream) -> None:
    fake_upstream.script({"text": "All good."})

    events, _ = await run_turn(agent_request("summarizer", [text("u1", "long story")]))

    assert streamed_text(events) == "All good."
    (request,) = fake_upstream.requests()
    assert request["messages"][0] == {"role": "system", "content": "Summarise in one line."}
    assert "tools" not in request or request["tools"] == []


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ({"kind": "python"}, "needs a 'class'"),
        ({"kind": "python", "class": "no.such.Module"}, "cannot be imported"),
        (
            {"kind": "python", "class": "tests.support.python_agents.NotAnAgent"},
            "not a PythonAgent",
        ),
        ({"kind": "llm", "tools": "serverAdd"}, "list of server action names"),
        ({"kind": "remote"}, "needs an 'endpoint'"),
        ({"kind": "remote", "endpoint": "nowhere"}, "No remote endpoint named 'nowhere'"),
        ({"kind": "agui"}, "needs a 'url'"),
        ({"kind": "telepathy"}, "Unknown agent kind 'telepathy'"),
    ],
)
def test_a_misconfigured_agent_is_refused_before_its_run_exists(
    db: None, agent: dict, message: str
) -> None:
    with (
        override_settings(COPILOT_RUNTIME={"AGENTS": {"bad": agent}}),
        pytest.raises(CopilotKitError) as caught,
    ):
        async_to_sync(turn_prepare)(
            user=AnonymousUser(),
            request=agent_request("bad", [text("u1", "hi")]),
            protocol="graphql",
        )

    assert caught.value.code in (ErrorCode.CONFIGURATION_ERROR, ErrorCode.REMOTE_ENDPOINT_NOT_FOUND)
    assert message in caught.value.message
    assert not Thread.objects.exists()


def test_an_unknown_agent_is_agent_not_found(db: None) -> None:
    with pytest.raises(AgentNotFoundError) as caught:
        async_to_sync(turn_prepare)(
            user=AnonymousUser(),
            request=agent_request("ghost", [text("u1", "hi")]),
            protocol="graphql",
        )

    assert caught.value.code == ErrorCode.AGENT_NOT_FOUND
