"""``stopRun(runId)``: stop a run from any connection (HTTP or websocket), wherever it executes.

Only the caller who may see the run's thread can stop it; anyone else gets the same
``Run not found`` as for an unknown id. Answers whether this call stopped it (false when the
run had already ended). What the run produced before the stop stays persisted.
"""

from __future__ import annotations

import strawberry

from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.resolvers.subscriptions import visible_run
from copilot_runtime.runs.executor import run_cancel


async def resolve_stop_run(info: strawberry.Info[RuntimeContext, None], run_id: str) -> bool:
    run = await visible_run(context=info.context, run_id=run_id)
    return await run_cancel(run_id=run.pk)
