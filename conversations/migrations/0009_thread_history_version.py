"""A thread's history version, for the PostgreSQL store's look-up (conversations/store/pg.py).

Every thread row carries ``history_version``, drawn from one sequence when the thread is made
and again whenever a statement updates or deletes any of its messages (a statement-level
trigger on the message table: the runtime's own superseding and restoring, the admin, a
retention purge or a hand-written query alike). Adding messages leaves it as it is.

A web process that looked a thread up at version V, and then stored the turn's new messages,
knows which message ids the thread holds as current while the version is still V: the next
turn asks the database about the other ids only (the history's new messages), not about
every id the client re-sends. A version the process does not expect sends it back to the
whole look-up. The sequence belongs to no column, so truncating the tables never starts the
versions again from a value a process may remember.

PostgreSQL only; 0013 declares the column on the Django model (the ORM reads it and never
writes it: a thread the ORM creates takes its version from the column's default) and adds it,
without versions, on SQLite.
"""

from collections.abc import Callable
from typing import Any

from django.db import migrations

_FORWARD = """
CREATE SEQUENCE conversations_history_version;
ALTER TABLE conversations_thread
    ADD COLUMN history_version bigint NOT NULL DEFAULT nextval('conversations_history_version');
CREATE FUNCTION conversations_history_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE conversations_thread SET history_version = nextval('conversations_history_version')
    WHERE id IN (SELECT DISTINCT thread_id FROM changed);
    RETURN NULL;
END
$$;
CREATE TRIGGER message_history_updated AFTER UPDATE ON conversations_message
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION conversations_history_changed();
CREATE TRIGGER message_history_deleted AFTER DELETE ON conversations_message
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION conversations_history_changed();
"""

_BACKWARD = """
DROP TRIGGER IF EXISTS message_history_deleted ON conversations_message;
DROP TRIGGER IF EXISTS message_history_updated ON conversations_message;
DROP FUNCTION IF EXISTS conversations_history_changed();
ALTER TABLE conversations_thread DROP COLUMN IF EXISTS history_version;
DROP SEQUENCE IF EXISTS conversations_history_version;
"""


def _on_postgresql(sql: str) -> Callable[[Any, Any], None]:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            with schema_editor.connection.cursor() as cursor:
                cursor.execute(sql)  # several statements: no parameters

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0008_message_set_aside"),
    ]

    operations = [
        migrations.RunPython(_on_postgresql(_FORWARD), _on_postgresql(_BACKWARD)),
    ]
