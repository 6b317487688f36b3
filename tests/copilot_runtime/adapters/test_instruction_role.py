"""The role instructions reach an OpenAI-compatible model with (``OPENAI_SYSTEM_ROLE``)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from copilot_runtime.adapters.base import ModelRequest
from copilot_runtime.adapters.openai_adapter import (
    OpenAIAdapter,
    instruction_role,
    with_instruction_role,
)


@pytest.mark.parametrize(
    ("setting", "url", "role"),
    [
        # auto: OpenAI's own API gets developer (as from the TypeScript runtime 1.10.6); other
        # servers (vLLM, Ollama, older Azure deployments) may refuse it and get system.
        ("auto", "https://api.openai.com/v1/chat/completions", "developer"),
        ("auto", "http://127.0.0.1:11434/v1/chat/completions", "system"),
        ("auto", "https://acme.openai.azure.com/openai/deployments/x/chat/completions", "system"),
        ("system", "https://api.openai.com/v1/chat/completions", "system"),
        ("developer", "http://localhost:8000/v1/chat/completions", "developer"),
    ],
)
def test_the_instruction_role_follows_the_setting_and_the_server(
    setting: str, url: str, role: str
) -> None:
    assert instruction_role(setting=setting, url=url) == role


def test_every_instruction_takes_the_role_and_nothing_else_changes() -> None:
    messages = [
        {"role": "system", "content": "Context"},
        {"role": "developer", "content": "Be brief"},
        {"role": "user", "content": "Hi"},
    ]
    assert with_instruction_role(messages, "developer") == [
        {"role": "developer", "content": "Context"},
        {"role": "developer", "content": "Be brief"},
        {"role": "user", "content": "Hi"},
    ]
    assert [m["role"] for m in with_instruction_role(messages, "system")] == [
        "system",
        "system",
        "user",
    ]
    assert messages[0]["role"] == "system" and messages[1]["role"] == "developer"
    plain = [{"role": "user", "content": "Hi"}]
    assert with_instruction_role(plain, "developer") is plain  # nothing copied when not needed


def test_a_history_already_in_the_role_is_sent_as_it_is() -> None:
    history = [
        {"role": "developer", "content": "Be brief"},
        {"content": "no role"},
        *({"role": "user", "content": f"q{n}"} for n in range(50)),
        {"role": "developer", "content": "Later instructions"},
    ]
    assert with_instruction_role(history, "developer") is history
    # One instruction far down in the other role is enough to convert it.
    converted = with_instruction_role([*history, {"role": "system", "content": "x"}], "developer")
    assert converted[-1] == {"role": "developer", "content": "x"}
    assert [m.get("role") for m in converted[:-1]] == [m.get("role") for m in history]
    assert with_instruction_role(history, "system")[0]["role"] == "system"


def test_messages_of_other_shapes_are_checked_all_the_same() -> None:
    class Message(dict[str, Any]):
        pass

    odd: list[Any] = [
        {"role": ["not", "a", "string"], "content": "x"},
        MappingProxyType({"role": "user", "content": "Hi"}),
        Message(role="system", content="Be brief"),
    ]
    converted = with_instruction_role(odd, "developer")
    assert converted[2] == {"role": "developer", "content": "Be brief"}
    assert converted[:2] == odd[:2]
    no_instructions = odd[:2]
    assert with_instruction_role(no_instructions, "developer") is no_instructions


@pytest.mark.parametrize("setting", ["auto", "developer"])
async def test_the_model_receives_the_role(fake_upstream: Any, setting: str) -> None:
    adapter = OpenAIAdapter(
        api_key="test",
        base_url=fake_upstream.base_url,
        model="m",
        timeout=5,
        max_retries=0,
        system_role=setting,
    )
    request = ModelRequest(
        messages=[{"role": "system", "content": "Rules"}, {"role": "user", "content": "Hi"}]
    )
    async for _ in adapter.stream(request):
        pass
    sent = fake_upstream.requests()[-1]["messages"]
    # The fake listens on loopback: auto sends system there.
    assert sent[0] == {"role": "system" if setting == "auto" else "developer", "content": "Rules"}
