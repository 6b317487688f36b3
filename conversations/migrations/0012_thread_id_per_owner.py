"""Client thread ids scoped to their owner: unique per (thread id, owner), not across owners.

Until now a thread id was unique across every caller, so another caller's run on an id that
was taken had to be refused: the refusal told that caller the id existed. Now each owner has a
namespace of thread ids, and another caller's id names a thread of that caller's own.

Anonymous callers (owner NULL, a development mode) share one namespace. A unique constraint
treats NULLs as distinct, so ``(thread_id, owner)`` alone would let two anonymous threads hold
one id: a partial unique index on ``thread_id`` where the owner is NULL keeps theirs unique
too. Not ``nulls_distinct=False``: that needs PostgreSQL 15, and SQLite (the embedded
default) ignores it; the partial index works on both.

The rows stay as they are: ids were unique across owners, so they are unique per owner. The
unique index on the id alone goes (as does its pattern index, which 0011 dropped already: the
schema editor drops it "IF EXISTS"); the new one leads with the id, so a look-up by id alone
still probes an index. Reversing rebuilds the id's own unique constraint, and fails while two
owners hold the same id; Django then adds a pattern index beside it, which 0011 keeps out, so
the reversal drops it again. The history-version trigger (0009) keys messages by the thread's
primary key and is not concerned.
"""

from typing import Any

from django.conf import settings
from django.db import migrations, models


def _drop_pattern_index(apps: Any, schema_editor: Any) -> None:
    """As 0011 left the id: without Django's ``varchar_pattern_ops`` index beside its key."""
    if schema_editor.connection.vendor != "postgresql":
        return
    table = apps.get_model("conversations", "Thread")._meta.db_table
    name = schema_editor._create_index_name(table, ["thread_id"], suffix="_like")
    schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0011_drop_pattern_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Reversed last: after the id's unique constraint (and its pattern index) is back.
        migrations.RunPython(migrations.RunPython.noop, _drop_pattern_index),
        # One transaction on PostgreSQL: the id is never left without a unique index.
        migrations.AlterField(
            model_name="thread",
            name="thread_id",
            field=models.CharField(max_length=255),
        ),
        migrations.AddConstraint(
            model_name="thread",
            constraint=models.UniqueConstraint(
                fields=("thread_id", "owner"), name="thread_unique_per_owner"
            ),
        ),
        migrations.AddConstraint(
            model_name="thread",
            constraint=models.UniqueConstraint(
                condition=models.Q(("owner__isnull", True)),
                fields=("thread_id",),
                name="thread_unique_anonymous",
            ),
        ),
    ]
