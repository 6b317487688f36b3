"""``manage.py reap_runs``: end the runs whose executor died or never started them.

The Celery beat schedule does this every ten seconds (``copilot.reap_stale_runs``); this is
the same service for a deployment without beat, e.g. from cron.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from copilot_runtime.runs.reaper import runs_reap_stale


class Command(BaseCommand):
    help = "Fail runs whose worker stopped beating, and pending runs no worker started in time."

    def handle(self, *args: Any, **options: Any) -> None:
        reaped = runs_reap_stale()
        self.stdout.write(f"Reaped {reaped} run(s).")
