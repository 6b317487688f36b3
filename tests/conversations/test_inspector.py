"""The session inspector: a thread read as a conversation, its runs and span waterfall,
filters and search, the JSON export, its actions and permissions, and its speed."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from conversations.models import Run, RunEvent, Thread
from conversations.selectors import thread_pending_interrupt
from tests.conversations.inspector_data import (
    SCRIPT_MESSAGE,
    InspectedThread,
    big_thread_create,
    inspected_thread_create,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def inspected(user: Any) -> InspectedThread:
    return inspected_thread_create(owner=user)


def inspect_url(thread: Thread) -> str:
    return reverse("admin:conversations_thread_inspect", args=[thread.pk])


def page_of(client: Client, url: str, **params: Any) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def section(page: str, section_id: str) -> str:
    """The HTML of one ``<section id=...>`` of the page."""
    match = re.search(rf'<section[^>]*id="{section_id}".*?</section>', page, re.S)
    assert match is not None, section_id
    return match.group(0)


# --- the conversation -------------------------------------------------------------------------


def test_the_transcript_reads_like_the_conversation(
    admin_client: Client, inspected: InspectedThread
) -> None:
    transcript = section(page_of(admin_client, inspect_url(inspected.thread)), "transcript")

    order = [
        "Run <a",
        "Plan a weekend in Lisbon",
        "lookupWeather",
        "Agent state",
        "An older answer",
        "Shall I book the hotel?",
        "Agent state",
        "Interrupt · LangGraphInterruptEvent",
        "Run <a",
        "Answer to the interrupt · LangGraphInterruptEvent",
        "Please render",
        "Booking",
        "The run failed · UPSTREAM_SERVER_ERROR",
    ]
    positions = []
    start = 0
    for text in order:
        found = transcript.find(text, start)
        assert found >= 0, f"{text!r} missing or out of order"
        positions.append(found)
        start = found + 1
    # A tool call with its arguments, and its result shown with it (not a second time).
    assert "&quot;city&quot;: &quot;Lisbon&quot;" in transcript
    assert transcript.count("&quot;forecast&quot;: &quot;sunny&quot;") == 1
    assert "ins-tool-result" in transcript
    # Roles, superseded and failed messages are marked.
    assert 'ins-role-user ins-kind-text"' in transcript
    assert transcript.count(" ins-superseded") == 1
    assert "Error streaming message content" in transcript
    assert "The model service answered 500." in transcript
    assert "yes, book it" in transcript
    assert "Book the hotel?" in transcript


def test_state_snapshots_say_what_changed(admin_client: Client, inspected: InspectedThread) -> None:
    transcript = section(page_of(admin_client, inspect_url(inspected.thread)), "transcript")

    first, second = re.findall(r'<div class="ins-entry ins-state">.*?</details>', transcript, re.S)
    assert "<strong>city</strong> added" in first
    assert "<strong>days</strong> added" in first
    assert "<strong>days</strong> changed: <code>3</code>" in second
    assert "(was <code>2</code>)" in second
    assert "<strong>hotel</strong> added" in second
    assert "city</strong>" not in second  # unchanged keys are not listed


def test_html_in_a_message_is_shown_as_text(
    admin_client: Client, inspected: InspectedThread
) -> None:
    page = page_of(admin_client, inspect_url(inspected.thread))

    assert "<script>alert('xss')</script>" not in page
    assert "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#x27;xss&#x27;)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;" in page


def test_html_everywhere_else_is_escaped_too(admin_client: Client, user: Any) -> None:
    evil = "<img src=x onerror=alert(1)>"
    data = inspected_thread_create(owner=user, thread_id=f"t{evil}")
    Thread.objects.filter(pk=data.thread.pk).update(title=evil)
    Run.objects.filter(pk=data.second_run.pk).update(
        error_code="E<i>", error_details={"message": evil}
    )
    from conversations.models import AgentState, Span

    AgentState.objects.create(thread=data.thread, agent_name=evil, state={evil: evil})
    Span.objects.filter(run=data.first_run, kind="tool").update(name=evil, attributes={evil: evil})

    page = page_of(admin_client, inspect_url(data.thread), run=data.first_run.pk)

    assert evil not in page
    assert "<i>" not in page


def test_the_conversation_is_paginated(admin_client: Client) -> None:
    thread = big_thread_create(messages=250, runs=5, spans_per_run=2)
    url = inspect_url(thread)

    first = section(page_of(admin_client, url), "transcript")
    last = section(page_of(admin_client, url, page=3), "transcript")
    beyond = section(page_of(admin_client, url, page=99), "transcript")

    assert "message number 0<" in first and "message number 99<" in first
    assert "message number 100<" not in first
    assert "page 1 of 3" in first
    assert "message number 249<" in last and "message number 199<" not in last
    assert beyond == last  # a page past the end shows the last one
    assert 'href="?page=2&amp;run=' in first


def test_search_in_the_thread_shows_only_matching_messages(
    admin_client: Client, inspected: InspectedThread
) -> None:
    transcript = section(
        page_of(admin_client, inspect_url(inspected.thread), q="HOTEL"), "transcript"
    )

    assert "Shall I book the hotel?" in transcript
    assert "Plan a weekend in Lisbon" not in transcript
    assert "1 message matching “HOTEL”" in transcript


# --- runs and the waterfall -------------------------------------------------------------------


def test_the_runs_table_shows_status_duration_model_tokens_cost_and_error(
    admin_client: Client, inspected: InspectedThread
) -> None:
    runs = section(page_of(admin_client, inspect_url(inspected.thread)), "runs")

    rows = re.findall(r"<tr class=.*?</tr>", runs, re.S)
    assert len(rows) == 2
    newest, oldest = rows
    assert "run-second" in newest and "Failed" in newest and "UPSTREAM_SERVER_ERROR" in newest
    assert "1.00 s" in newest and "800 / 20" in newest
    assert "run-first" in oldest and "Interrupted" in oldest
    assert "2.50 s" in oldest and "gpt-4o-mini" in oldest and "$0.000360" in oldest


def test_the_summary_totals_the_thread(admin_client: Client, inspected: InspectedThread) -> None:
    summary = section(page_of(admin_client, inspect_url(inspected.thread)), "summary")

    assert '<td id="total-runs">2</td>' in summary
    assert "2000 in (200 cached) / 320 out" in summary
    assert '<td id="total-cost">$0.000360</td>' in summary


def test_the_waterfall_draws_a_runs_spans_to_scale(
    admin_client: Client, inspected: InspectedThread
) -> None:
    page = page_of(admin_client, inspect_url(inspected.thread), run="run-first")
    waterfall = section(page, "waterfall")

    rows = re.findall(
        r'<details class="wf-row (.*?)" data-kind="(\w+)">(.*?)</details>', waterfall, re.S
    )
    assert [kind for _, kind, _ in rows] == ["agent", "generation", "tool", "generation", "tool"]
    bars = [re.search(r"left: ([\d.]+)%; width: ([\d.]+)%", body).groups() for _, _, body in rows]
    # The run lasted 2.5 s: the first tool ran from 0.5 s to 1.0 s, i.e. 20 % + 20 %.
    assert bars[0] == ("0.000", "100.000")
    assert bars[2] == ("20.000", "20.000")
    assert bars[4] == ("88.000", "12.000")
    classes = [css for css, _, _ in rows]
    assert "wf-error" in classes[2] and "wf-error" not in classes[1]
    assert "wf-incomplete" in classes[4]
    # Children are indented under the run span.
    assert "padding-left: 0.0em" in rows[0][2] and "padding-left: 1.2em" in rows[1][2]
    assert "2.50 s" in waterfall  # the axis ends at the run's duration
    assert '<th scope="row">gen_ai.usage.cost</th><td>0.00018</td>' in waterfall


def test_the_latest_run_is_shown_by_default(
    admin_client: Client, inspected: InspectedThread
) -> None:
    waterfall = section(page_of(admin_client, inspect_url(inspected.thread)), "waterfall")

    assert "Spans of run run-second" in waterfall
    assert waterfall.count('class="wf-row') == 1


def test_a_run_of_another_thread_is_not_shown(
    admin_client: Client, inspected: InspectedThread
) -> None:
    other = Thread.objects.create(thread_id="other")
    Run.objects.create(id="run-elsewhere", thread=other)

    waterfall = section(
        page_of(admin_client, inspect_url(inspected.thread), run="run-elsewhere"), "waterfall"
    )

    assert "run-elsewhere" not in waterfall


def test_the_run_list_links_to_its_waterfall(
    admin_client: Client, inspected: InspectedThread
) -> None:
    page = page_of(admin_client, reverse("admin:conversations_run_changelist"))

    assert f'href="{inspect_url(inspected.thread)}?run=run-first#waterfall"' in page
    assert "$0.000360" in page


# --- filters ----------------------------------------------------------------------------------


def changelist_ids(client: Client, **params: Any) -> set[str]:
    response = client.get(reverse("admin:conversations_thread_changelist"), params)
    assert response.status_code == 200
    return {thread.thread_id for thread in response.context["cl"].result_list}


@pytest.fixture
def several_threads(inspected: InspectedThread, other_user: Any) -> None:
    Thread.objects.create(thread_id="plain", agent_name="default", owner=other_user)
    busy = Thread.objects.create(thread_id="busy", agent_name="default", status="running")
    Run.objects.create(id="r-busy", thread=busy, status="failed", error_code="WORKER_LOST")


def test_the_thread_list_filters_by_agent_status_error_code_and_owner(
    admin_client: Client, several_threads: None, user: Any, other_user: Any
) -> None:
    assert changelist_ids(admin_client, agent_name="travel") == {"inspected-thread"}
    assert changelist_ids(admin_client, status="running") == {"busy"}
    assert changelist_ids(admin_client, error_code="WORKER_LOST") == {"busy"}
    assert changelist_ids(admin_client, error_code="UPSTREAM_SERVER_ERROR") == {"inspected-thread"}
    assert changelist_ids(admin_client, owner__id__exact=other_user.pk) == {"plain"}
    assert changelist_ids(admin_client) == {"inspected-thread", "plain", "busy"}


def test_the_thread_list_filters_by_date(admin_client: Client, several_threads: None) -> None:
    Thread.objects.filter(thread_id="plain").update(created_at="2020-05-01T00:00:00Z")

    assert changelist_ids(admin_client, created_at__year=2020) == {"plain"}


def test_the_thread_list_searches_message_content(
    admin_client: Client, several_threads: None
) -> None:
    assert changelist_ids(admin_client, q="weekend in lisbon") == {"inspected-thread"}


def test_the_error_code_filter_lists_the_codes_seen(
    admin_client: Client, several_threads: None
) -> None:
    response = admin_client.get(reverse("admin:conversations_thread_changelist"))

    page = response.content.decode()
    assert "?error_code=WORKER_LOST" in page
    assert "?error_code=UPSTREAM_SERVER_ERROR" in page


# --- export -----------------------------------------------------------------------------------


def export(client: Client, thread: Thread) -> dict[str, Any]:
    response = client.get(reverse("admin:conversations_thread_export", args=[thread.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith("attachment;")
    return json.loads(b"".join(response.streaming_content))


def test_the_export_has_messages_states_runs_and_spans(
    admin_client: Client, inspected: InspectedThread
) -> None:
    document = export(admin_client, inspected.thread)

    assert document["thread"]["thread_id"] == "inspected-thread"
    assert document["thread"]["owner"] == "alice"
    assert [m["position"] for m in document["messages"]] == list(range(7))
    assert document["messages"][5]["content"] == SCRIPT_MESSAGE
    assert [s["state"].get("days") for s in document["agent_states"]] == [2, 3]
    assert [r["id"] for r in document["runs"]] == ["run-first", "run-second"]
    assert document["runs"][0]["cost"] == "0.0003600000"
    assert "request_payload" not in document["runs"][0]
    assert len(document["spans"]) == 6
    assert {s["run_id"] for s in document["spans"]} == {"run-first", "run-second"}


def test_the_export_of_a_big_thread_is_complete(admin_client: Client) -> None:
    thread = big_thread_create(messages=3000, runs=30, spans_per_run=100)

    document = export(admin_client, thread)

    assert len(document["messages"]) == 3000
    assert len(document["runs"]) == 30
    assert len(document["spans"]) == 3000


# --- actions ----------------------------------------------------------------------------------


def test_stopping_a_running_run_from_the_inspector(
    admin_client: Client, inspected: InspectedThread
) -> None:
    run = Run.objects.create(id="run-live", thread=inspected.thread, status="running")
    url = inspect_url(inspected.thread)
    page = page_of(admin_client, url)
    assert reverse("admin:conversations_run_stop", args=[run.pk]) in page

    response = admin_client.post(
        reverse("admin:conversations_run_stop", args=[run.pk]), {"next": url}
    )

    assert response.status_code == 302
    assert response["Location"] == url
    run.refresh_from_db()
    assert run.cancel_requested is True


def test_stopping_an_ended_run_says_so(admin_client: Client, inspected: InspectedThread) -> None:
    response = admin_client.post(
        reverse("admin:conversations_run_stop", args=["run-first"]),
        {"next": "https://evil.example/"},
        follow=True,
    )

    (message,) = [str(m) for m in response.context["messages"]]
    assert "had already ended" in message
    # The redirect never leaves the site.
    assert response.redirect_chain[0][0] == reverse(
        "admin:conversations_run_change", args=["run-first"]
    )


def test_stop_and_clear_need_a_post(admin_client: Client, inspected: InspectedThread) -> None:
    stop = admin_client.get(reverse("admin:conversations_run_stop", args=["run-first"]))
    clear = admin_client.get(
        reverse("admin:conversations_thread_clear_interrupt", args=[inspected.thread.pk])
    )

    assert (stop.status_code, clear.status_code) == (405, 405)


def test_the_stop_action_on_the_run_list(admin_client: Client, inspected: InspectedThread) -> None:
    running = Run.objects.create(id="run-a", thread=inspected.thread, status="running")
    # One active run per thread: the pending one is another thread's.
    other = Thread.objects.create(thread_id="another-thread")
    pending = Run.objects.create(id="run-b", thread=other, status="pending")

    response = admin_client.post(
        reverse("admin:conversations_run_changelist"),
        {"action": "stop_runs", "_selected_action": ["run-a", "run-b", "run-first"]},
        follow=True,
    )

    assert "Asked 2 run(s) to stop." in [str(m) for m in response.context["messages"]]
    assert Run.objects.filter(pk__in=[running.pk, pending.pk], cancel_requested=True).count() == 2


def test_clearing_a_pending_interrupt(admin_client: Client, inspected: InspectedThread) -> None:
    # The thread waits on the interrupt its latest finished run logged.
    Run.objects.filter(pk="run-second").update(status="interrupted")
    RunEvent.objects.create(
        run_id="run-second",
        seq=1,
        type="meta_event",
        payload={"name": "LangGraphInterruptEvent", "value": "Pay now?"},
    )
    assert thread_pending_interrupt(thread_pk=inspected.thread.pk) != []
    page = page_of(admin_client, inspect_url(inspected.thread))
    assert 'id="clear-interrupt"' in page

    response = admin_client.post(
        reverse("admin:conversations_thread_clear_interrupt", args=[inspected.thread.pk]),
        follow=True,
    )

    assert "The pending interrupt was cleared." in [str(m) for m in response.context["messages"]]
    assert 'id="clear-interrupt"' not in response.content.decode()
    assert Thread.objects.get(pk=inspected.thread.pk).status == "idle"
    assert thread_pending_interrupt(thread_pk=inspected.thread.pk) == []
    cleared = Run.objects.get(pk="run-second")
    assert (cleared.status, cleared.error_code) == ("cancelled", "INTERRUPT_CLEARED")
    assert cleared.error_details == {
        "message": "The pending interrupt was cleared in the admin by admin."
    }
    # The earlier interrupted run is history: left as it was.
    assert Run.objects.get(pk="run-first").status == "interrupted"


def test_clearing_a_thread_without_an_interrupt_says_so(
    admin_client: Client, inspected: InspectedThread
) -> None:
    Thread.objects.filter(pk=inspected.thread.pk).update(status="idle")

    response = admin_client.post(
        reverse("admin:conversations_thread_clear_interrupt", args=[inspected.thread.pk]),
        follow=True,
    )

    assert "This thread has no pending interrupt." in [str(m) for m in response.context["messages"]]
    assert Run.objects.get(pk="run-second").status == "failed"


def test_the_clear_action_on_the_thread_list(
    admin_client: Client, inspected: InspectedThread
) -> None:
    idle = Thread.objects.create(thread_id="idle-one")

    response = admin_client.post(
        reverse("admin:conversations_thread_changelist"),
        {"action": "clear_interrupts", "_selected_action": [inspected.thread.pk, idle.pk]},
        follow=True,
    )

    assert "Cleared the pending interrupt of 1 thread(s)." in [
        str(m) for m in response.context["messages"]
    ]
    assert Thread.objects.get(pk=inspected.thread.pk).status == "idle"


# --- permissions ------------------------------------------------------------------------------


def staff_client(*codenames: str) -> Client:
    user = get_user_model().objects.create_user(
        username=f"staff-{'-'.join(codenames) or 'none'}", password="pw", is_staff=True
    )
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="conversations", codename__in=codenames)
    )
    client = Client()
    client.force_login(user)
    return client


def test_anonymous_visitors_are_sent_to_the_login(inspected: InspectedThread) -> None:
    response = Client().get(inspect_url(inspected.thread))

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_a_non_staff_user_cannot_inspect(inspected: InspectedThread, user: Any) -> None:
    client = Client()
    client.force_login(user)

    response = client.get(inspect_url(inspected.thread))

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_staff_without_the_thread_permission_is_refused(inspected: InspectedThread) -> None:
    client = staff_client("view_message", "view_run", "view_span")

    for url in (
        inspect_url(inspected.thread),
        reverse("admin:conversations_thread_export", args=[inspected.thread.pk]),
    ):
        assert client.get(url).status_code == 403


def test_staff_sees_only_the_sections_it_may_view(inspected: InspectedThread) -> None:
    client = staff_client("view_thread", "view_run")

    page = page_of(client, inspect_url(inspected.thread))

    assert "Spans of run" not in page
    assert "You do not have permission to view spans." in page
    assert "You do not have permission to view messages." in page
    assert "Plan a weekend" not in page
    assert 'id="runs"' in page
    assert "Stop run" not in page and "clear-interrupt" not in page
    response = client.get(reverse("admin:conversations_thread_export", args=[inspected.thread.pk]))
    document = json.loads(b"".join(response.streaming_content))
    assert set(document) == {"thread", "runs"}


def test_staff_without_change_permissions_cannot_stop_or_clear(inspected: InspectedThread) -> None:
    client = staff_client("view_thread", "view_run")
    Run.objects.create(id="run-live", thread=inspected.thread, status="running")

    stop = client.post(reverse("admin:conversations_run_stop", args=["run-live"]))
    clear = client.post(
        reverse("admin:conversations_thread_clear_interrupt", args=[inspected.thread.pk])
    )

    assert (stop.status_code, clear.status_code) == (403, 403)
    assert Run.objects.get(pk="run-live").cancel_requested is False
    assert Thread.objects.get(pk=inspected.thread.pk).status == "interrupted"


def test_an_unknown_thread_is_refused_like_a_forbidden_one(admin_client: Client) -> None:
    response = admin_client.get(reverse("admin:conversations_thread_inspect", args=[999999]))

    assert response.status_code == 403


# --- speed ------------------------------------------------------------------------------------


def test_the_inspector_stays_fast_on_a_big_thread(
    admin_client: Client, django_assert_max_num_queries: Any
) -> None:
    """5,000 messages over 50 runs, one run of 1,000 spans: a fixed number of queries, one
    page of each (the number does not grow with the rows: more spans in the other runs would
    only make the test slower)."""
    thread = big_thread_create(messages=5000, runs=50, spans_per_run=20, spans_of_run={7: 1000})
    admin_client.get(inspect_url(thread))  # warm the session and permission caches

    with django_assert_max_num_queries(16):
        response = admin_client.get(inspect_url(thread), {"page": 20, "run": "big-run-00007"})
    page = response.content.decode()

    assert response.status_code == 200
    assert page.count('class="ins-entry ins-message') == 100
    assert "message number 1900<" in page and "message number 1999<" in page
    assert page.count('class="wf-row') == 500
    assert "spans 1 to 500 of 1000" in page
    assert section(page, "runs").count("<tr class=") == 25  # one page of runs

    with django_assert_max_num_queries(16):
        response = admin_client.get(inspect_url(thread), {"q": "number 4999"})
    assert response.content.decode().count('class="ins-entry ins-message') == 1


def test_a_long_run_s_spans_are_paged_on_one_timeline(admin_client: Client) -> None:
    thread = big_thread_create(messages=10, runs=1, spans_per_run=1200)
    url = inspect_url(thread)

    first = section(page_of(admin_client, url), "waterfall")
    last = section(page_of(admin_client, url, spans_page=3), "waterfall")
    beyond = section(page_of(admin_client, url, spans_page=9), "waterfall")

    assert first.count('class="wf-row') == 500 and "spans 1 to 500 of 1200" in first
    assert last.count('class="wf-row') == 200 and "spans 1001 to 1200 of 1200" in last
    assert beyond == last
    assert "later spans" in first and "earlier spans" in last
    # Span 1000 starts 1000 ms into a run of 1200 ms: placed on the run's whole axis.
    offsets = re.findall(r"left: ([\d.]+)%", last)
    assert float(offsets[5]) == pytest.approx(1000 / 1200 * 100, abs=0.01)


def test_a_page_number_that_is_no_number_is_the_first_page_and_a_huge_one_the_last(
    admin_client: Client,
) -> None:
    thread = big_thread_create(messages=10, runs=1, spans_per_run=1200)
    url = inspect_url(thread)
    first = section(page_of(admin_client, url), "waterfall")
    last = section(page_of(admin_client, url, spans_page=3), "waterfall")

    # "²" and "٣" are digits to str.isdigit (int() refuses the one, reads 3 in the other).
    for page in ("²", "٣", " 2", "+2", "0", "-2", "abc"):
        assert section(page_of(admin_client, url, spans_page=page), "waterfall") == first, page
    # Past int()'s 4,300 digits, or an offset past the database's bigint: the last page.
    for page in ("99999999999999999999", "9" * 5000):
        assert section(page_of(admin_client, url, spans_page=page), "waterfall") == last
    for name in ("page", "runs_page"):
        for page in ("²", "99999999999999999999", "9" * 5000):
            page_of(admin_client, url, **{name: page})  # answered (200), not a 500 page


def test_a_run_whose_process_died_shows_as_interrupted_with_what_it_stored(
    admin_client: Client,
) -> None:
    """A process killed mid-run: the reaper ends the run (``WORKER_LOST``) from its log, and
    the inspector shows the part it had stored under a heading that says what happened."""
    import datetime as dt

    from django.utils import timezone

    from copilot_runtime.runs.reaper import runs_reap_stale

    thread = Thread.objects.create(thread_id="crashed-thread", agent_name="default")
    stale = timezone.now() - dt.timedelta(minutes=5)
    run = Run.objects.create(
        id="run-crashed", thread=thread, status="running", heartbeat_at=stale, started_at=stale
    )
    logged = [
        ("text_start", {"message_id": "m-partial", "role": "assistant"}),
        ("text_delta", {"message_id": "m-partial", "delta": "Half of an"}),
        ("text_delta", {"message_id": "m-partial", "delta": " answer"}),
    ]
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=seq, type=kind, payload=payload)
        for seq, (kind, payload) in enumerate(logged, start=1)
    )

    assert runs_reap_stale(run_ids=[run.pk]) == 1

    transcript = section(page_of(admin_client, inspect_url(thread)), "transcript")
    assert "Half of an answer" in transcript
    heading = transcript.find("Interrupted: the process executing this run stopped")
    assert heading > transcript.find("Half of an answer") >= 0
    assert "WORKER_LOST" in transcript[heading:]
    assert "The run failed" not in transcript
