"""Put back the database's guard of one active run per thread.

Migration 0006 dropped the foreign-key index of ``conversations_run.thread_id``; on
PostgreSQL, Django's schema editor took the partial unique index ``run_one_active_per_thread``
(on that one column) for it and dropped that instead, while the migration state kept the
constraint. Databases migrated through 0006 therefore lack it; this creates it where it is
missing (nothing changes where it survived, e.g. SQLite, which rebuilds the table).

A thread that meanwhile got two active runs keeps its newest one; the older ones are failed
first, or the index could not be built.
"""

from django.db import migrations
from django.db.models import Count
from django.utils import timezone

ACTIVE = ("pending", "running")
CODE = "SUPERSEDED_ACTIVE_RUN"


def fail_all_but_the_newest_active_run(apps, schema_editor):
    Run = apps.get_model("conversations", "Run")
    crowded = (
        Run.objects.filter(status__in=ACTIVE)
        .values("thread_id")
        .annotate(active=Count("id"))
        .filter(active__gt=1)
        .values_list("thread_id", flat=True)
    )
    now = timezone.now()
    for thread_id in list(crowded):
        active = Run.objects.filter(thread_id=thread_id, status__in=ACTIVE).order_by(
            "-created_at", "-id"
        )
        older = [run.pk for run in active[1:]]
        Run.objects.filter(pk__in=older).update(
            status="failed",
            error_code=CODE,
            error_details={"message": "Another run of this thread was active at the same time."},
            finished_at=now,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0006_fk_indexes_covered"),
    ]

    operations = [
        migrations.RunPython(fail_all_but_the_newest_active_run, migrations.RunPython.noop),
        migrations.RunSQL(
            'CREATE UNIQUE INDEX IF NOT EXISTS "run_one_active_per_thread" ON "conversations_run" '
            "(\"thread_id\") WHERE \"status\" IN ('pending', 'running')",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
