"""Every run ends: a run whose output cannot be stored is still recorded as ended (failed,
``STORAGE_ERROR``) and its watchers are told, so its thread is never left busy."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import Run, RunEvent, RunStatus, Thread
from conversations.store.orm import OrmTurnStore
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs.start import turn_start

pytestmark = pytest.mark.django_db(transaction=True)


def _request(thread_id: str) -> Any:
    return parse_generate_input(
        {
            "threadId": thread_id,
            "messages": [
                {"id": "u1", "textMessage": {"role": "user", "content": 'FAKE: {"tokens": 3}'}}
            ],
        },
        None,
    )


async def test_a_run_whose_last_batch_cannot_be_stored_ends_failed(
    fake_upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_record_many = OrmTurnStore.record_many

    async def refusing(self: Any, *, entries: Any) -> None:
        # Every write of the store goes through record_many.
        if any(
            entry.progress.outcome is not None
            and entry.progress.outcome.error_code != "STORAGE_ERROR"
            for entry in entries
        ):
            raise RuntimeError("the database refused the batch")
        await real_record_many(self, entries=entries)

    monkeypatch.setattr(OrmTurnStore, "record_many", refusing)
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
        }
    ):
        started = await turn_start(
            user=AnonymousUser(), request=_request("t-unstorable"), protocol="graphql"
        )
        events = []
        while (event := await asyncio.wait_for(started.events.get(), 10)) is not None:
            events.append(event)

    assert [e.type for e in events[-2:]] == ["run_error", "run_finished"]
    assert events[-2].code == "STORAGE_ERROR"
    run = await Run.objects.aget(pk=started.run_id)
    assert (run.status, run.error_code) == (RunStatus.FAILED, "STORAGE_ERROR")
    assert (await Thread.objects.aget(thread_id="t-unstorable")).status == "idle"
    logged = [e.type async for e in RunEvent.objects.filter(run_id=run.pk).order_by("seq")]
    assert logged[-2:] == ["run_error", "run_finished"]
