"""Guardrails end to end: the real CopilotKit GraphQL client against the served process.

An allowed request, a denial in blocking mode (no model call) and in parallel mode (the model
stops and the streaming message fails), a rule added through the admin taking effect on the
next request without a restart, and the Copilot Cloud path against a loopback stand-in of
``/guardrails/validate`` (the client's own public API key and ``cloud.guardrails`` lists).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from conversations.models import RunStatus, Thread
from copilot_runtime.guardrails.verdicts import DEFAULT_DENIAL_TEXT
from copilot_runtime.models import GuardrailEvaluation, GuardrailRule
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.cloud_guardrails import CloudGuardrailsStandIn
from tests.support.generate_e2e import (
    assert_no_traceback,
    finished_run,
    generate_command,
    generate_data,
    joined_content,
    prompt_words,
    server_env,
    text_input,
    thread_rows,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)

GUARDRAILS_CODE = "GUARDRAILS_VALIDATION_FAILED"
INTERRUPTED = "Interrupted due to Guardrails validation failure. Reason: "


def denied_status(reason: str) -> dict[str, Any]:
    return {
        "code": "Failed",
        "__typename": "FailedResponseStatus",
        "reason": GUARDRAILS_CODE,
        "details": {"guardrailsReason": reason},
    }


def guarded_env(fake_upstream: FakeUpstream, **settings: str) -> dict[str, str]:
    return server_env(
        fake_upstream.base_url,
        **{f"COPILOT_RUNTIME_{key}": value for key, value in settings.items()},
    )


@pytest.fixture
def cloud() -> Iterator[CloudGuardrailsStandIn]:
    with CloudGuardrailsStandIn() as stand_in:
        yield stand_in


def evaluations_of(run_id: str) -> list[GuardrailEvaluation]:
    return wait_for(
        lambda: list(GuardrailEvaluation.objects.filter(run_id=run_id).order_by("pk")),
        what=f"the guardrails evaluations of run {run_id}",
    )


@versions
def test_an_allowed_request_is_answered_and_its_evaluation_recorded(
    live_server_factory: Any, fake_upstream: FakeUpstream, version: str
) -> None:
    server = live_server_factory(env=guarded_env(fake_upstream, GUARDRAILS_EVALUATOR="model"))
    GuardrailRule.objects.create(name="No politics", kind="deny", match="topic", text="politics")
    fake_upstream.script(
        {"text": '{"allowed": true, "reason": "A cooking question.", "topic": null}'},
        {"text": "Boil it for nine minutes."},
    )
    thread_id = f"guard-allowed-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "How long for pasta?")])

    result = run_js(version, generate_command(server.url, data))

    final = result["final"]
    assert result["errors"] == []
    assert final["status"] == {"code": "Success", "__typename": "SuccessResponseStatus"}
    (message,) = final["messages"]
    assert joined_content(message) == "Boil it for nine minutes."
    classifier, turn = fake_upstream.requests()
    run = finished_run(final["runId"])
    assert run.status == RunStatus.SUCCEEDED
    # The classifier's tokens are part of the run's usage.
    assert run.input_tokens == prompt_words(classifier) + prompt_words(turn)
    (record,) = evaluations_of(run.pk)
    assert (record.evaluator, record.verdict, record.mode) == ("model", "allowed", "blocking")
    assert [row.status for row in thread_rows(thread_id)] == ["success", "success"]


@versions
def test_a_blocking_denial_fails_the_response_without_calling_the_model(
    live_server_factory: Any, fake_upstream: FakeUpstream, version: str
) -> None:
    server = live_server_factory(env=guarded_env(fake_upstream, GUARDRAILS_EVALUATOR="local"))
    rule = GuardrailRule.objects.create(
        name="SSNs", kind="deny", match="pattern", text=r"\b\d{3}-\d{2}-\d{4}\b"
    )
    thread_id = f"guard-blocking-{version}"
    data = generate_data(
        thread_id=thread_id, messages=[text_input("u1", "My SSN is 123-45-6789, remember it")]
    )

    result = run_js(version, generate_command(server.url, data))

    final = result["final"]
    assert [exchange["status"] for exchange in result["http"]] == [200]
    # The client is told no rule's name; the run's records keep it.
    assert final["status"] == denied_status(DEFAULT_DENIAL_TEXT)
    assert "SSNs" not in str(result)
    assert final["messages"] == []
    assert fake_upstream.requests() == []
    assert_no_traceback(str(result))
    run = finished_run(final["runId"])
    assert (run.status, run.error_code) == (RunStatus.FAILED, GUARDRAILS_CODE)
    (user_row,) = thread_rows(thread_id)
    assert (user_row.message_id, user_row.status) == ("u1", "failed")
    assert (
        user_row.status_reason
        == 'denied by guardrails: The message matches a denied pattern (rule "SSNs").'
    )
    (record,) = evaluations_of(run.pk)
    assert (record.rule_id, record.verdict) == (rule.pk, "denied")
    assert Thread.objects.get(thread_id=thread_id).title == ""  # not titled by the denied message


@versions
def test_a_parallel_denial_stops_the_model_and_fails_the_streaming_message(
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    cloud: CloudGuardrailsStandIn,
    version: str,
) -> None:
    server = live_server_factory(
        env=guarded_env(
            fake_upstream,
            GUARDRAILS_MODE="parallel",
            GUARDRAILS_EVALUATOR="cloud",
            COPILOT_CLOUD_BASE_URL=cloud.base_url,
            COPILOT_CLOUD_PUBLIC_API_KEY="ck_pub_server",
        )
    )
    GuardrailRule.objects.create(name="No politics", kind="deny", match="topic", text="politics")
    fake_upstream.script({"tokens": 300, "delay_ms": 15})
    # The verdict arrives while the model streams: once its request is in, and a little later.
    cloud.reply(
        {"status": "denied", "reason": "Politics is off limits"},
        wait_until=lambda: bool(fake_upstream.requests()),
        delay=0.4,
    )
    closed_before = fake_upstream.stats()["client_closed"]
    thread_id = f"guard-parallel-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Politics, please")])

    result = run_js(version, generate_command(server.url, data))

    # The cloud judged a stored rule too: the end user is told the default text.
    reason = DEFAULT_DENIAL_TEXT
    final = result["final"]
    assert final["status"] == denied_status(reason)
    (message,) = final["messages"]
    streamed = joined_content(message)
    assert streamed.startswith("t0 t1")
    assert len(streamed.split()) < 300
    assert message["status"] == {
        "code": "Failed",
        "reason": INTERRUPTED + reason,
        "__typename": "FailedMessageStatus",
    }
    wait_for(
        lambda: fake_upstream.stats()["client_closed"] > closed_before,
        what="the model's stream to be closed",
    )
    run = finished_run(final["runId"])
    assert (run.status, run.error_code) == (RunStatus.FAILED, GUARDRAILS_CODE)
    user_row, assistant_row = thread_rows(thread_id)
    assert user_row.status_reason.startswith("denied")
    assert (assistant_row.status, assistant_row.status_reason) == ("failed", INTERRUPTED + reason)
    (record,) = evaluations_of(run.pk)
    assert (record.evaluator, record.mode, record.verdict) == ("cloud", "parallel", "denied")
    assert cloud.requests[0].headers["x-copilotcloud-public-api-key"] == "ck_pub_server"


@versions
def test_the_copilot_cloud_path_with_the_clients_key_and_lists(
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    cloud: CloudGuardrailsStandIn,
    version: str,
) -> None:
    server = live_server_factory(
        env=guarded_env(fake_upstream, COPILOT_CLOUD_BASE_URL=cloud.base_url)
    )
    cloud.reply({"status": "allowed"})
    cloud.reply({"status": "denied", "reason": "Topic not allowed"})
    lists = {
        "guardrails": {"inputValidationRules": {"allowList": ["cooking"], "denyList": ["politics"]}}
    }
    thread_id = f"guard-cloud-{version}"
    first = generate_data(thread_id=thread_id, messages=[text_input("u1", "Pasta tips?")])
    first["cloud"] = lists
    fake_upstream.script({"text": "Salt the water."})

    allowed = run_js(version, generate_command(server.url, first, publicApiKey="ck_pub_client"))

    assert allowed["final"]["status"]["__typename"] == "SuccessResponseStatus"
    (reply,) = allowed["final"]["messages"]
    second = generate_data(
        thread_id=thread_id,
        run_id=allowed["final"]["runId"],
        messages=[
            text_input("u1", "Pasta tips?"),
            text_input(reply["id"], joined_content(reply), role="assistant"),
            text_input("u2", "And who should I vote for?"),
        ],
    )
    second["cloud"] = lists
    denied = run_js(version, generate_command(server.url, second, publicApiKey="ck_pub_client"))

    assert denied["final"]["status"] == denied_status("Topic not allowed")
    assert len(fake_upstream.requests()) == 1  # only the first request reached the model
    first_call, second_call = cloud.requests
    assert second_call.path == "/guardrails/validate"
    assert second_call.headers["x-copilotcloud-public-api-key"] == "ck_pub_client"
    assert second_call.body == {
        "input": "And who should I vote for?",
        "validTopics": ["cooking"],
        "invalidTopics": ["politics"],
        "messages": [
            {"role": "user", "content": "Pasta tips?"},
            {"role": "assistant", "content": "Salt the water."},
        ],
    }
    assert first_call.body["input"] == "Pasta tips?"
    run = finished_run(denied["final"]["runId"])
    records = evaluations_of(run.pk)
    assert {(r.source, r.evaluator, r.verdict) for r in records} == {("request", "cloud", "denied")}


# --- the admin --------------------------------------------------------------------------------


def _csrf_token(page: httpx.Response) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert found, page.text[:500]
    return found.group(1)


@contextlib.contextmanager
def admin_session(server_url: str, *, username: str, password: str) -> Iterator[httpx.Client]:
    """A logged-in admin session on the served process, as a browser would have it."""
    with httpx.Client(base_url=server_url, timeout=30) as browser:
        login = browser.get("/admin/login/")
        answer = browser.post(
            "/admin/login/",
            data={
                "csrfmiddlewaretoken": _csrf_token(login),
                "username": username,
                "password": password,
                "next": "/admin/",
            },
        )
        assert answer.status_code == 302, answer.text[:2000]
        yield browser


def admin_form_post(browser: httpx.Client, path: str, form: dict[str, str]) -> httpx.Response:
    page = browser.get(path)
    assert page.status_code == 200, page.text[:500]
    return browser.post(path, data={"csrfmiddlewaretoken": _csrf_token(page), **form})


@versions
def test_a_rule_edited_in_the_admin_applies_to_the_next_request(
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    django_user_model: Any,
    user_password: str,
    version: str,
) -> None:
    server = live_server_factory(env=guarded_env(fake_upstream, GUARDRAILS_EVALUATOR="local"))
    django_user_model.objects.create_superuser(
        username="root", email="root@example.com", password=user_password
    )
    thread_id = f"guard-admin-{version}"

    def ask(message_id: str, text: str) -> dict[str, Any]:
        data = generate_data(
            thread_id=f"{thread_id}-{message_id}", messages=[text_input(message_id, text)]
        )
        return run_js(version, generate_command(server.url, data))["final"]

    before = ask("u1", "Tell me about crypto")
    assert before["status"]["__typename"] == "SuccessResponseStatus"

    with admin_session(server.url, username="root", password=user_password) as browser:
        added = admin_form_post(
            browser,
            "/admin/copilot_runtime/guardrailrule/add/",
            {
                "name": "No crypto",
                "kind": "deny",
                "match": "topic",
                "text": "crypto, bitcoin",
                "denial_text": "Let's keep crypto out of this.",
                "agent_name": "",
                "enabled": "on",
                "priority": "0",
            },
        )
        assert added.status_code == 302, added.text[:2000]
        rule = GuardrailRule.objects.get(name="No crypto")

        denied = ask("u2", "Tell me about crypto")
        assert denied["status"] == denied_status("Let's keep crypto out of this.")

        page = browser.get(f"/admin/copilot_runtime/guardrailrule/{rule.pk}/change/")
        assert page.status_code == 200
        assert "The message is about a denied topic" in page.text  # its recent evaluations

        switched_off = admin_form_post(
            browser,
            f"/admin/copilot_runtime/guardrailrule/{rule.pk}/change/",
            {
                "name": "No crypto",
                "kind": "deny",
                "match": "topic",
                "text": "crypto, bitcoin",
                "agent_name": "",
                "priority": "0",
            },  # "enabled" left out: unchecked
        )
        assert switched_off.status_code == 302, switched_off.text[:2000]

    after = ask("u3", "Tell me about crypto")
    assert after["status"]["__typename"] == "SuccessResponseStatus"
    assert len(fake_upstream.requests()) == 2  # the denied request never reached the model
