"""The admin keeps records as they were written: runs, messages, agent states, run events,
spans and guardrail evaluations are viewed, never added, changed or deleted on their own. The
documented operations (stop a run, clear an interrupt, delete a thread) each need a permission
of their own: a superuser has it, a staff user given it may, one without it may not."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.models import AgentState, Message, Run, RunEvent, Span, Thread
from copilot_runtime.models import GuardrailEvaluation
from tests.conversations.factories import message_row, state_row, thread_create

pytestmark = pytest.mark.django_db

VIEW_ALL = ("view_thread", "view_run", "view_message")


def staff_client(*codenames: str) -> Client:
    user = get_user_model().objects.create_user(
        username=f"staff-{len(codenames)}-{'-'.join(codenames)}"[:150],
        password="pw",
        is_staff=True,
    )
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label__in=("conversations", "copilot_runtime"),
            codename__in=codenames,
        )
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def records() -> list[Model]:
    thread = thread_create(thread_id="recorded", title="Recorded")
    run = Run.objects.create(id="run-rec", thread=thread, status="succeeded", model="m1")
    message = message_row(thread=thread, position=0, role="user", content="hello", run=run)
    state = state_row(thread=thread, state={"a": 1})
    event = RunEvent.objects.create(run=run, seq=1, type="RUN_STARTED", payload={})
    span = Span.objects.create(
        trace_id="c" * 32,
        span_id="d" * 16,
        run=run,
        kind="run",
        name="run",
        started_at=run.created_at,
    )
    evaluation = GuardrailEvaluation.objects.create(
        run=run, source="stored", rule_kind="deny", rule_match="topic", rule_text="x",
        agent_name="default", evaluator="local", mode="blocking", verdict="allowed", latency_ms=1,
    )  # fmt: skip
    return [run, message, state, event, span, evaluation]


def url_of(row: Model, view: str, *args: Any) -> str:
    return reverse(f"admin:{row._meta.app_label}_{row._meta.model_name}_{view}", args=args)


def test_no_record_can_be_added_changed_or_deleted_even_by_a_superuser(
    admin_client: Client, records: list[Model]
) -> None:
    for row in records:
        name = row._meta.model_name
        assert admin_client.get(url_of(row, "add")).status_code == 403, name
        page = admin_client.get(url_of(row, "change", row.pk))
        assert page.status_code == 200, name  # viewed, read-only
        assert 'name="_save"' not in page.content.decode(), name
        before = {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields}
        posted = admin_client.post(url_of(row, "change", row.pk), {"status": "failed"})
        assert posted.status_code == 403, name
        row.refresh_from_db()
        assert {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields} == before
        changelist = admin_client.get(url_of(row, "changelist"))
        assert changelist.status_code == 200, name
        assert "delete_selected" not in changelist.content.decode(), name
        assert admin_client.get(url_of(row, "delete", row.pk)).status_code == 403, name


@pytest.fixture
def live_run() -> Run:
    thread = thread_create(thread_id="live")
    return Run.objects.create(id="run-live", thread=thread, status="running")


@pytest.mark.parametrize(
    ("who", "allowed"),
    [("superuser", True), ("stop_run", True), ("change_run", False), ("view only", False)],
)
def test_stopping_a_run_needs_its_own_permission(
    admin_client: Client, live_run: Run, who: str, allowed: bool
) -> None:
    extra = () if who in ("superuser", "view only") else (who,)
    client = admin_client if who == "superuser" else staff_client(*VIEW_ALL, *extra)
    inspect = client.get(reverse("admin:conversations_thread_inspect", args=[live_run.thread_id]))
    stop_url = reverse("admin:conversations_run_stop", args=[live_run.pk])
    assert (stop_url in inspect.content.decode()) is allowed
    changelist = client.get(reverse("admin:conversations_run_changelist"))
    assert ('value="stop_runs"' in changelist.content.decode()) is allowed

    response = client.post(stop_url)
    action = client.post(
        reverse("admin:conversations_run_changelist"),
        {"action": "stop_runs", "_selected_action": [live_run.pk]},
    )

    assert response.status_code == (302 if allowed else 403)
    # An action one may not run is not offered; posting it changes nothing.
    assert action.status_code in (200, 302)
    assert Run.objects.get(pk=live_run.pk).cancel_requested is allowed


@pytest.mark.parametrize(
    ("who", "allowed"),
    [
        ("superuser", True),
        ("clear_interrupt", True),
        ("change_thread", False),
        ("view only", False),
    ],
)
def test_clearing_an_interrupt_needs_its_own_permission(
    admin_client: Client, who: str, allowed: bool
) -> None:
    thread = thread_create(thread_id="waiting")
    Thread.objects.filter(pk=thread.pk).update(status="interrupted")
    Run.objects.create(id="run-waiting", thread=thread, status="interrupted")
    extra = () if who in ("superuser", "view only") else (who,)
    client = admin_client if who == "superuser" else staff_client(*VIEW_ALL, *extra)
    inspect = client.get(reverse("admin:conversations_thread_inspect", args=[thread.pk]))
    assert ('id="clear-interrupt"' in inspect.content.decode()) is allowed

    response = client.post(reverse("admin:conversations_thread_clear_interrupt", args=[thread.pk]))
    client.post(
        reverse("admin:conversations_thread_changelist"),
        {"action": "clear_interrupts", "_selected_action": [thread.pk]},
    )

    assert response.status_code == (302 if allowed else 403)
    assert Thread.objects.get(pk=thread.pk).status == ("idle" if allowed else "interrupted")


@pytest.mark.parametrize(
    ("who", "allowed"), [("superuser", True), ("delete_thread", True), ("view only", False)]
)
def test_deleting_a_thread_takes_its_records_on_the_thread_permission(
    admin_client: Client, records: list[Model], who: str, allowed: bool
) -> None:
    thread = Thread.objects.get(thread_id="recorded")
    extra = () if who in ("superuser", "view only") else (who,)
    client = admin_client if who == "superuser" else staff_client(*VIEW_ALL, *extra)
    delete_url = reverse("admin:conversations_thread_delete", args=[thread.pk])

    confirm = client.get(delete_url)
    response = client.post(delete_url, {"post": "yes"})

    assert confirm.status_code == (200 if allowed else 403)
    assert response.status_code == (302 if allowed else 403)
    assert Thread.objects.filter(pk=thread.pk).exists() is not allowed
    kept = [Run, Message, AgentState, RunEvent, Span]
    assert all(model.objects.exists() is not allowed for model in kept)
    # The guardrail's record outlives the run it judged (its link is cleared).
    assert GuardrailEvaluation.objects.count() == 1


def test_the_run_page_shows_the_run_read_only_with_its_stop_button(
    admin_client: Client, live_run: Run
) -> None:
    Run.objects.filter(pk=live_run.pk).update(
        executor="celery", started_at=timezone.now(), protocol="agui"
    )
    page = admin_client.get(reverse("admin:conversations_run_change", args=[live_run.pk]))

    body = page.content.decode()
    assert page.status_code == 200
    assert "celery" in body and "agui" in body and "anonymous" in body
    assert 'form="stop-run-form"' in body
    assert 'name="_save"' not in body


def test_the_demo_pages_link_opens_the_visitors_thread_in_the_inspector(
    admin_client: Client, admin_user: Any
) -> None:
    anonymous = thread_create(thread_id="shared-id")
    own = thread_create(thread_id="shared-id", owner=admin_user)
    only_anonymous = thread_create(thread_id="anonymous-only")
    open_url = reverse("admin:conversations_thread_open")

    def target(thread_id: str) -> str:
        response = admin_client.get(open_url, {"thread": thread_id})
        assert response.status_code == 302
        return str(response["Location"])

    def inspector(thread: Thread) -> str:
        return reverse("admin:conversations_thread_inspect", args=[thread.pk])

    assert target("shared-id") == inspector(own)  # one's own before the anonymous one
    assert target("anonymous-only") == inspector(only_anonymous)
    assert anonymous.pk != own.pk
    assert target("no-such-thread") == (
        reverse("admin:conversations_thread_changelist") + "?q=no-such-thread"
    )
    refused = staff_client("view_run").get(open_url, {"thread": "shared-id"})
    assert refused.status_code == 403


def test_a_threads_title_is_edited_and_what_its_turns_made_is_not(
    admin_client: Client, admin_user: Any
) -> None:
    thread = thread_create(thread_id="edited", title="Old title")
    url = reverse("admin:conversations_thread_change", args=[thread.pk])

    response = admin_client.post(
        url,
        {
            "title": "New title",
            "metadata": "{}",
            "status": "running",
            "owner": str(admin_user.pk),
            "agent_name": "other",
        },
    )

    assert response.status_code == 302
    edited = Thread.objects.get(pk=thread.pk)
    assert edited.title == "New title"
    assert (edited.status, edited.owner_id, edited.agent_name) == ("idle", None, "default")
