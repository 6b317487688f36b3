"""The thread's history version (0009) declared on the Django model.

0009 added the column, its sequence and the triggers on PostgreSQL only, outside the model.
Declared now (``Thread.history_version``, a field the ORM reads and never writes), the state
takes the field as it is: on PostgreSQL the database is left as 0009 made it. SQLite (the
embedded default) never had the column, and the ORM now reads it: it is added there, with 0
for every thread (nothing draws versions on SQLite, and nothing reads them but the model).
"""

from typing import Any

from django.db import migrations

import conversations.models


def _add_elsewhere(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        return  # 0009 added it
    schema_editor.execute(
        "ALTER TABLE conversations_thread ADD COLUMN history_version bigint NOT NULL DEFAULT 0"
    )


def _drop_elsewhere(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        return  # 0009's reversal drops it
    schema_editor.execute("ALTER TABLE conversations_thread DROP COLUMN history_version")


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0012_thread_id_per_owner"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="thread",
                    name="history_version",
                    field=conversations.models.HistoryVersionField(),
                ),
            ],
            database_operations=[migrations.RunPython(_add_elsewhere, _drop_elsewhere)],
        ),
    ]
