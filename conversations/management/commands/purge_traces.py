"""Delete old run events and spans (messages and agent states are kept).

python manage.py purge_traces                      # older than TRACE_RETENTION_DAYS
python manage.py purge_traces --older-than-days 7 --batch-size 2000 --dry-run

Run it daily (cron, a Celery beat entry); it can run while the server serves.
"""

from __future__ import annotations

import datetime as dt
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from conversations.management.retention import traces_purge
from copilot_runtime.conf import runtime_setting


class Command(BaseCommand):
    help = (
        "Delete the event logs and trace spans of finished runs older than an age "
        "(default: COPILOT_RUNTIME['TRACE_RETENTION_DAYS']); messages and states are kept."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--older-than-days",
            type=float,
            default=None,
            help="Age in days (default: the TRACE_RETENTION_DAYS setting).",
        )
        parser.add_argument("--batch-size", type=int, default=5000, help="Rows per delete.")
        parser.add_argument(
            "--pause-ms", type=int, default=0, help="Pause between steps, in milliseconds."
        )
        parser.add_argument("--dry-run", action="store_true", help="Count, delete nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["older_than_days"]
        if days is None:
            days = runtime_setting("TRACE_RETENTION_DAYS")
            if not days:
                self.stdout.write("TRACE_RETENTION_DAYS is not set: nothing is purged.")
                return
        days = float(days)
        if days < 0:
            raise CommandError("The age must not be negative.")
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        result = traces_purge(
            older_than=dt.timedelta(days=days),
            batch_size=options["batch_size"],
            dry_run=options["dry_run"],
            pause_seconds=options["pause_ms"] / 1000,
        )
        verb = "Would delete" if options["dry_run"] else "Deleted"
        self.stdout.write(
            f"{verb} {result.run_events} run event(s) and {result.spans} span(s) of "
            f"{result.runs} run(s) older than {days:g} day(s), and {result.blobs} unused "
            "content blob(s)."
        )
