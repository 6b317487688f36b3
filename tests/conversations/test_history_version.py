"""``Thread.history_version`` (migrations 0009, 0013): the database draws it, the ORM reads it
and never writes it, on PostgreSQL and on the embedded default's SQLite alike."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from conversations.models import Message, Thread

ROOT = Path(__file__).resolve().parents[2]


def _version(thread: Thread) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT history_version FROM conversations_thread WHERE id = %s", [thread.pk]
        )
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_a_thread_the_orm_makes_takes_its_version_from_the_database() -> None:
    first = Thread.objects.create(thread_id="t-drawn-1")
    second = Thread.objects.create(thread_id="t-drawn-2")

    assert first.history_version == _version(first)
    assert second.history_version == _version(second)
    assert first.history_version != second.history_version  # drawn from the sequence


@pytest.mark.django_db(transaction=True)
def test_saving_a_thread_read_before_its_messages_changed_keeps_the_new_version() -> None:
    """A thread read, then its messages superseded (a new version drawn), then saved: the old
    version is not written back, or a process that knew its messages at that version would
    take them for current."""
    thread = Thread.objects.create(thread_id="t-stale")
    Message.objects.create(
        thread=thread,
        position=0,
        message_id="m0",
        kind="text",
        role="user",
        created_at=timezone.now(),
    )
    read = Thread.objects.get(pk=thread.pk)
    Message.objects.filter(thread=thread).update(superseded=True)
    changed = _version(thread)
    assert changed != read.history_version

    read.title = "renamed"
    read.save()

    assert _version(thread) == changed
    read.refresh_from_db()
    assert (read.title, read.history_version) == ("renamed", changed)


_ON_SQLITE = """
from django.core.management import call_command
from django.db import connection
from conversations.models import Thread

def columns():
    with connection.cursor() as cursor:
        return [c.name for c in connection.introspection.get_table_description(
            cursor, "conversations_thread")]

call_command("migrate", verbosity=0)
assert "history_version" in columns()
thread = Thread.objects.create(thread_id="t-sqlite")
thread.title = "renamed"
thread.save()
thread.refresh_from_db()
assert (thread.title, thread.history_version) == ("renamed", 0), thread.history_version
call_command("migrate", "conversations", "0012", verbosity=0)
assert "history_version" not in columns()
call_command("migrate", verbosity=0)
assert Thread.objects.get(thread_id="t-sqlite").history_version == 0
print("ok")
"""


def test_on_sqlite_the_column_is_added_and_taken_away_with_0013(
    tmp_path: Path, base_subprocess_env: dict[str, str]
) -> None:
    """0009 adds the column on PostgreSQL only; the embedded default's SQLite gets it from
    0013 (without versions: nothing draws them there), and loses it when 0013 is reversed."""
    env = {
        **base_subprocess_env,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "copilot_runtime.site.settings",
    }
    script = "import django; django.setup()\n" + _ON_SQLITE

    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")
