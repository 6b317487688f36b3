"""A run's event log and its spans, without a foreign-key constraint on their run.

The database checked every event and span row against its run's row, with a trigger per row,
on the hot path of every turn (the reasons are at ``RunEvent.run`` in conversations/models.py).
The relation stays the ORM's: Django still joins and deletes through it. On PostgreSQL the
constraints are dropped; SQLite rebuilds both tables without them.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0009_thread_history_version"),
    ]

    operations = [
        migrations.AlterField(
            model_name="runevent",
            name="run",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="events",
                to="conversations.run",
            ),
        ),
        migrations.AlterField(
            model_name="span",
            name="run",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="spans",
                to="conversations.run",
            ),
        ),
    ]
