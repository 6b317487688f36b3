"""Copilot Cloud's /guardrails/validate as an evaluator, against a loopback stand-in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from copilot_runtime.events.request import InputMessage
from copilot_runtime.guardrails.cloud import CloudEvaluator
from copilot_runtime.guardrails.rules import Subject
from copilot_runtime.guardrails.verdicts import decide
from tests.copilot_runtime.guardrails.helpers import allow_topic, deny_topic
from tests.support.cloud_guardrails import CloudGuardrailsStandIn

RULES = [deny_topic("politics"), allow_topic("cooking")]
SUBJECT = Subject(
    text="What about the election?",
    message_id="u2",
    agent_name="default",
    earlier=[
        InputMessage(id="u1", kind="text", role="user", content="Hi"),
        InputMessage(id="a1", kind="text", role="assistant", content="Hello!"),
    ],
)


@pytest.fixture
def cloud() -> Iterator[CloudGuardrailsStandIn]:
    with CloudGuardrailsStandIn() as stand_in:
        yield stand_in


def evaluator(cloud: CloudGuardrailsStandIn, *, key: str = "ck_pub_test", timeout: float = 5):
    return CloudEvaluator(base_url=cloud.base_url + "/", public_api_key=key, timeout=timeout)


async def test_the_request_carries_the_key_the_topics_and_the_history(
    cloud: CloudGuardrailsStandIn,
) -> None:
    cloud.reply({"status": "allowed"})

    found = await evaluator(cloud).evaluate(SUBJECT, RULES)

    (request,) = cloud.requests
    assert request.path == "/guardrails/validate"
    assert request.headers["x-copilotcloud-public-api-key"] == "ck_pub_test"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "input": "What about the election?",
        "validTopics": ["cooking"],
        "invalidTopics": ["politics"],
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
    }
    assert found.error == ""
    assert found.matched == [False, None]
    assert found.vouched
    assert not decide([found], fails_closed=True).denied


async def test_a_denial_is_a_veto_with_the_clouds_reason(cloud: CloudGuardrailsStandIn) -> None:
    cloud.reply({"status": "denied", "reason": "Topic not allowed"})

    found = await evaluator(cloud).evaluate(SUBJECT, RULES)
    decision = decide([found], fails_closed=True)

    assert found.vetoed
    assert decision.denied and decision.reason == "Topic not allowed"
    assert [record.verdict for record in decision.records] == ["denied", "denied"]


async def test_a_denial_without_a_reason_gets_the_default_one(
    cloud: CloudGuardrailsStandIn,
) -> None:
    cloud.reply({"status": "denied"})

    decision = decide([await evaluator(cloud).evaluate(SUBJECT, RULES)], fails_closed=True)

    assert decision.reason == "Topic not allowed"


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ({"body": {"message": "boom"}, "status_code": 500}, "Copilot Cloud answered HTTP 500"),
        ({"raw": b"<html>oops</html>"}, "Copilot Cloud answered something that is not JSON"),
        ({"body": {"status": "maybe"}}, "Copilot Cloud answered an unknown status 'maybe'"),
    ],
)
async def test_a_bad_answer_fails_the_evaluator(
    cloud: CloudGuardrailsStandIn, reply: dict, error: str
) -> None:
    body = reply.pop("body", None)
    cloud.reply(body, **reply)

    found = await evaluator(cloud).evaluate(SUBJECT, RULES)

    assert found.error == error
    assert decide([found], fails_closed=True).denied
    assert not decide([found], fails_closed=False).denied


async def test_a_slow_cloud_times_out(cloud: CloudGuardrailsStandIn) -> None:
    cloud.reply({"status": "allowed"}, delay=1.0)

    found = await evaluator(cloud, timeout=0.2).evaluate(SUBJECT, RULES)

    assert found.error == "Copilot Cloud did not answer within 0.2 s"


async def test_an_unreachable_cloud_fails_the_evaluator() -> None:
    with CloudGuardrailsStandIn() as gone:
        url = gone.base_url
    found = await CloudEvaluator(base_url=url, public_api_key="k", timeout=2).evaluate(
        SUBJECT, RULES
    )

    assert found.error == "Copilot Cloud could not be reached (ConnectError)"


async def test_without_a_key_the_cloud_is_not_called(cloud: CloudGuardrailsStandIn) -> None:
    found = await evaluator(cloud, key="").evaluate(SUBJECT, RULES)

    assert found.error.startswith("no Copilot Cloud public API key")
    assert cloud.requests == []
