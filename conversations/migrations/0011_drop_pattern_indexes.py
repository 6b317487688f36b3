"""Drop the pattern indexes Django adds beside three text keys on PostgreSQL.

For a ``CharField`` that is a primary key, unique or indexed, Django's PostgreSQL schema
editor builds a second index with ``varchar_pattern_ops`` (named ``..._like``), which serves
only case-sensitive prefix matches (``LIKE 'abc%'``, ``__startswith``). Nothing here matches
so: the keys are looked up by equality, which the primary key, unique or foreign-key index
serves, and the admin searches with ``icontains``, whose leading wildcard no index serves. Yet
every row written updates the pattern index too, and a turn writes a run (insert, then an
update that changes an indexed column) and its messages: dropping the three took about
0.1 ms of PostgreSQL's time per turn in the celery shape (pg_stat_statements, 50
conversations).

Not in the migration state (Django does not model these indexes); a later ``AlterField`` of
one of these fields would build its index again. SQLite has no such indexes.
"""

from django.db import migrations

# (model, column): the run's id, the thread's public id, the message's run.
KEYS = (("run", "id"), ("thread", "thread_id"), ("message", "run_id"))


def _pattern_indexes(apps, schema_editor):
    for model_name, column in KEYS:
        table = apps.get_model("conversations", model_name)._meta.db_table
        name = schema_editor._create_index_name(table, [column], suffix="_like")
        yield table, column, name


def drop_pattern_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for _table, _column, name in _pattern_indexes(apps, schema_editor):
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


def create_pattern_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    for table, column, name in _pattern_indexes(apps, schema_editor):
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {quote(name)}"
            f" ON {quote(table)} ({quote(column)} varchar_pattern_ops)"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0010_run_log_without_fk_constraints"),
    ]

    operations = [migrations.RunPython(drop_pattern_indexes, create_pattern_indexes)]
