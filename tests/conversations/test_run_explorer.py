"""The run explorer: runs found by latency, time to first token, cost, tokens, user and
executor (ranges in the query string, so a found set is a link), sorted by any of them, in a
bounded number of queries."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from conversations.admin.runs import RunAdmin
from conversations.models import Run
from tests.conversations.factories import thread_create

pytestmark = pytest.mark.django_db

RUNS = reverse("admin:conversations_run_changelist")
START = timezone.now() - dt.timedelta(hours=1)


def run_with(
    run_id: str,
    *,
    latency_ms: int,
    first_token_ms: int,
    cost: str,
    tokens: tuple[int, int],
    owner: Any = None,
    executor: str = "inline",
) -> Run:
    thread = thread_create(thread_id=f"t-{run_id}", owner=owner)
    return Run.objects.create(
        id=run_id,
        thread=thread,
        status="succeeded",
        executor=executor,
        started_at=START,
        first_token_at=START + dt.timedelta(milliseconds=first_token_ms),
        finished_at=START + dt.timedelta(milliseconds=latency_ms),
        cost=Decimal(cost),
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        model="m1",
    )


@pytest.fixture
def runs(user: Any) -> None:
    run_with("fast", latency_ms=400, first_token_ms=100, cost="0.0005", tokens=(30000, 50))
    run_with(
        "middle",
        latency_ms=2500,
        first_token_ms=700,
        cost="0.004",
        tokens=(1500, 200),
        owner=user,
        executor="celery",
    )
    run_with("slow", latency_ms=45000, first_token_ms=300, cost="0.25", tokens=(20000, 900))


def found(client: Client, **params: str) -> list[str]:
    response = client.get(RUNS, params)
    assert response.status_code == 200, response
    return [run.pk for run in response.context["cl"].result_list]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"latency_ms_min": "1000", "latency_ms_max": "5000"}, {"middle"}),
        ({"latency_ms_min": "30000"}, {"slow"}),
        ({"ttft_ms_max": "500"}, {"fast", "slow"}),
        ({"ttft_ms_min": "500", "ttft_ms_max": "2000"}, {"middle"}),
        ({"cost_min": "0.01"}, {"slow"}),
        ({"cost_max": "0.001"}, {"fast"}),
        ({"tokens_min": "1000", "tokens_max": "10000"}, {"middle"}),
        ({"executor__exact": "celery"}, {"middle"}),
        ({"latency_ms_max": "5000", "tokens_min": "1000"}, {"fast", "middle"}),
        ({"latency_ms_max": "5000", "tokens_max": "10000"}, {"middle"}),
    ],
)
def test_runs_are_found_by_ranges_and_executor(
    admin_client: Client, runs: None, params: dict[str, str], expected: set[str]
) -> None:
    assert set(found(admin_client, **params)) == expected


def test_runs_are_found_by_their_user(admin_client: Client, runs: None, user: Any) -> None:
    assert found(admin_client, user=str(user.pk)) == ["middle"]
    assert sorted(found(admin_client, user="anonymous")) == ["fast", "slow"]
    assert found(admin_client, q=user.get_username()) == ["middle"]
    page = admin_client.get(RUNS).content.decode()
    assert f'?user={user.pk}"' in page  # offered in the sidebar, by name
    assert admin_client.get(RUNS, {"user": "x"})["Location"].endswith("?e=1")


@pytest.mark.parametrize(
    ("column", "ascending"),
    [
        ("latency_display", ["fast", "middle", "slow"]),
        ("first_token_display", ["fast", "slow", "middle"]),
        ("cost_display", ["fast", "middle", "slow"]),
        ("tokens_display", ["middle", "slow", "fast"]),
    ],
)
def test_runs_sort_by_each_measure(
    admin_client: Client, runs: None, column: str, ascending: list[str]
) -> None:
    # The changelist counts its checkbox column first.
    index = RunAdmin.list_display.index(column) + 1
    assert found(admin_client, o=str(index)) == ascending
    assert found(admin_client, o=f"-{index}") == ascending[::-1]


def test_a_range_that_is_no_number_is_refused_with_the_admins_own_page(
    admin_client: Client, runs: None
) -> None:
    for bad in ("abc", "-1", "nan", "1e999999"):
        response = admin_client.get(RUNS, {"latency_ms_min": bad})
        assert response.status_code == 302, bad
        assert response["Location"].endswith("?e=1"), bad


def test_the_filters_offer_ranges_as_links_and_a_form_keeping_the_other_filters(
    admin_client: Client, runs: None
) -> None:
    response = admin_client.get(RUNS, {"status__exact": "succeeded", "cost_min": "0.001"})

    page = response.content.decode()
    assert "By latency" in page and "By time to first token" in page
    assert "?cost_min=0.001&amp;latency_ms_max=1000&amp;status__exact=succeeded" in page
    # The form carries the other filters along with its own range.
    assert '<input type="hidden" name="status__exact" value="succeeded">' in page
    assert 'name="cost_min" value="0.001"' in page
    assert sorted(found(admin_client, status__exact="succeeded", cost_min="0.001")) == [
        "middle",
        "slow",
    ]


def test_the_run_list_reads_in_the_same_number_of_queries_whatever_its_length(
    admin_client: Client, user: Any
) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(RUNS).status_code == 200
        return len(captured)

    owner = get_user_model().objects.create_user(username="someone", password="pw")
    run_with("first", latency_ms=1, first_token_ms=1, cost="0", tokens=(1, 1), owner=owner)
    few = queries()
    for index in range(20):
        run_with(f"r{index}", latency_ms=1, first_token_ms=1, cost="0", tokens=(1, 1), owner=user)
    assert queries() == few
