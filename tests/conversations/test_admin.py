"""The admin: every page renders for a superuser; API tokens are issued and revoked there."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.models import AgentState, Message, Run, RunEvent, Span, Thread
from copilot_runtime.auth import do_issue_token
from copilot_runtime.models import ApiToken, GuardrailRule, token_hash
from tests.conversations.factories import message_row, run_row, state_row, thread_create

pytestmark = pytest.mark.django_db

RAW_TOKEN_PATTERN = re.compile(r"crt_[A-Za-z0-9_-]{20,}")


@dataclass
class AdminData:
    thread: Thread
    message: Message
    state: AgentState
    run: Run
    event: RunEvent
    span: Span
    token: ApiToken
    rule: GuardrailRule

    def rows(self) -> list[Model]:
        return [
            self.thread,
            self.message,
            self.state,
            self.run,
            self.event,
            self.span,
            self.token,
            self.rule,
        ]


@pytest.fixture
def data(user: Any) -> AdminData:
    thread = thread_create(thread_id="trip-thread", owner=user, title="Trip to Lisbon")
    run = run_row(thread=thread, status="succeeded", run_id="run-admin-1")
    message = message_row(
        thread=thread,
        position=0,
        message_id="msg-question",
        role="user",
        content="Where should I eat in Lisbon?",
        run=run,
    )
    message_row(
        thread=thread,
        position=1,
        message_id="msg-old-answer",
        role="assistant",
        content="An answer that was regenerated",
        superseded=True,
    )
    state_row(thread=thread, state={"city": "Porto"})
    state = state_row(thread=thread, state={"city": "Lisbon", "days": 3})
    event = RunEvent.objects.create(run=run, seq=1, type="RUN_STARTED", payload={})
    span = Span.objects.create(
        trace_id="a" * 32,
        span_id="b" * 16,
        run=run,
        kind="generation",
        name="gpt call",
        started_at=timezone.now(),
    )
    token, _raw = do_issue_token(user=user, name="ci bot")
    rule = GuardrailRule.objects.create(name="no politics", kind="deny", text="politics")
    return AdminData(
        thread=thread,
        message=message,
        state=state,
        run=run,
        event=event,
        span=span,
        token=token,
        rule=rule,
    )


def admin_url(row: Model, view: str, *args: Any) -> str:
    meta = row._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def test_admin_index_lists_every_model(admin_client: Client) -> None:
    response = admin_client.get(reverse("admin:index"))

    assert response.status_code == 200
    for name in (
        "Threads",
        "Messages",
        "Agent states",
        "Runs",
        "Run events",
        "Spans",
        "API tokens",
        "Guardrail rules",
    ):
        assert name in response.content.decode()


def test_every_changelist_renders(admin_client: Client, data: AdminData) -> None:
    for row in data.rows():
        response = admin_client.get(admin_url(row, "changelist"))
        assert response.status_code == 200, row._meta.model_name
        assert response.context["cl"].result_count >= 1, row._meta.model_name


@pytest.mark.parametrize("query", ["lisbon", "run-admin-1", "nothing-matches-this"])
def test_every_changelist_search_works(admin_client: Client, data: AdminData, query: str) -> None:
    for row in data.rows():
        response = admin_client.get(admin_url(row, "changelist"), {"q": query})
        assert response.status_code == 200, row._meta.model_name


def test_thread_search_finds_message_content_once(admin_client: Client, data: AdminData) -> None:
    response = admin_client.get(admin_url(data.thread, "changelist"), {"q": "Lisbon"})

    assert response.status_code == 200
    assert response.context["cl"].result_count == 1


def test_every_change_page_renders(admin_client: Client, data: AdminData) -> None:
    for row in data.rows():
        response = admin_client.get(admin_url(row, "change", row.pk))
        assert response.status_code == 200, row._meta.model_name


def test_only_configuration_has_add_pages(admin_client: Client, data: AdminData) -> None:
    """Tokens and rules are added in the admin; threads and their records never are."""
    for row in data.rows():
        response = admin_client.get(admin_url(row, "add"))
        configuration = isinstance(row, ApiToken | GuardrailRule)
        assert response.status_code == (200 if configuration else 403), row._meta.model_name


def test_thread_change_page_shows_the_latest_state_and_links_to_the_inspector(
    admin_client: Client, data: AdminData
) -> None:
    response = admin_client.get(admin_url(data.thread, "change", data.thread.pk))

    page = response.content.decode()
    assert response.status_code == 200
    assert "Latest agent state" in page
    assert "<th>city</th><td>Lisbon</td>" in page
    assert "<th>days</th><td>3</td>" in page
    assert "Porto" not in page
    # The messages are read in the inspector (an inline of 5,000 rows would not load).
    assert "Where should I eat in Lisbon?" not in page
    inspect_url = reverse("admin:conversations_thread_inspect", args=[data.thread.pk])
    assert f'href="{inspect_url}"' in page


def test_the_inspector_shows_every_message_superseded_ones_marked(
    admin_client: Client, data: AdminData
) -> None:
    response = admin_client.get(
        reverse("admin:conversations_thread_inspect", args=[data.thread.pk])
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "Where should I eat in Lisbon?" in page
    assert "An answer that was regenerated" in page
    assert page.count(" ins-superseded") == 1


def test_thread_change_page_without_state(admin_client: Client) -> None:
    thread = thread_create()

    response = admin_client.get(reverse("admin:conversations_thread_change", args=[thread.pk]))

    assert response.status_code == 200
    assert "Latest agent state" in response.content.decode()


def test_state_values_are_escaped_on_the_thread_page(admin_client: Client) -> None:
    thread = thread_create()
    state_row(thread=thread, state={"note": "<script>alert(1)</script>"})

    response = admin_client.get(reverse("admin:conversations_thread_change", args=[thread.pk]))

    page = response.content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_issuing_a_token_in_the_admin_shows_it_once_and_stores_its_hash(
    admin_client: Client, user: Any
) -> None:
    response = admin_client.post(
        reverse("admin:copilot_runtime_apitoken_add"),
        {"name": "frontend", "user": user.pk, "_save": "Save"},
        follow=True,
    )

    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    raw_tokens = [m for text in shown for m in RAW_TOKEN_PATTERN.findall(text)]
    assert len(raw_tokens) == 1, shown
    raw = raw_tokens[0]
    assert response.content.decode().count(raw) == 1

    token = ApiToken.objects.get()
    assert (token.name, token.user_id) == ("frontend", user.pk)
    assert token.token_hash == token_hash(raw)
    assert token.token_prefix == raw[:10]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table}")
        stored = cursor.fetchall()
    assert raw not in repr(stored)

    # Not shown again on its own page.
    page = admin_client.get(reverse("admin:copilot_runtime_apitoken_change", args=[token.pk]))
    assert raw not in page.content.decode()


def test_revoke_action_revokes_the_selected_tokens(admin_client: Client, user: Any) -> None:
    first, _ = do_issue_token(user=user, name="one")
    second, _ = do_issue_token(user=user, name="two")
    kept, _ = do_issue_token(user=user, name="kept")

    response = admin_client.post(
        reverse("admin:copilot_runtime_apitoken_changelist"),
        {"action": "revoke_tokens", "_selected_action": [first.pk, second.pk], "index": 0},
        follow=True,
    )

    assert response.status_code == 200
    assert "Revoked 2 token(s)." in [str(m) for m in response.context["messages"]]
    for token in (first, second):
        token.refresh_from_db()
        assert token.revoked_at is not None
    kept.refresh_from_db()
    assert kept.revoked_at is None


def test_editing_a_token_in_the_admin_keeps_its_secret(admin_client: Client, user: Any) -> None:
    token, raw = do_issue_token(user=user, name="old name")

    response = admin_client.post(
        reverse("admin:copilot_runtime_apitoken_change", args=[token.pk]),
        {"name": "new name", "user": user.pk, "_save": "Save"},
    )

    assert response.status_code == 302
    token.refresh_from_db()
    assert token.name == "new name"
    assert token.token_hash == token_hash(raw)


def test_the_run_page_shows_tripped_limits(admin_client: Client) -> None:
    thread = Thread.objects.create(thread_id="trips-thread")
    Run.objects.create(
        id="run-trips",
        thread=thread,
        status="failed",
        error_code="circuit_breaker_empty_tool_calls",
        limit_trips=[
            {"kind": "tool_circuit_breaker", "message": "m", "details": {}},
            {"kind": "tool_circuit_breaker", "message": "m", "details": {}},
            {"kind": "circuit_breaker_empty_tool_calls", "message": "m", "details": {}},
        ],
    )
    response = admin_client.get(reverse("admin:conversations_run_change", args=["run-trips"]))
    assert response.status_code == 200
    body = response.content.decode()
    assert "tool_circuit_breaker x2" in body
    assert "circuit_breaker_empty_tool_calls x1" in body
