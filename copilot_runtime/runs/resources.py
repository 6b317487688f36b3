"""What an event loop opened for its turns, closed when its process stops: the PostgreSQL turn
store's pools, the model adapters' HTTP pools and the task queue's Redis client.

Called by the web process's lifespan (``copilot_runtime/lifespan.py``) and by a worker's run
loop as it exits (``worker_loop.py``).
"""

from __future__ import annotations

import logging

from conversations.store import turn_store_close
from copilot_runtime.adapters import adapters_close
from copilot_runtime.runs.publish import task_publish_close

logger = logging.getLogger(__name__)


async def close_turn_resources() -> None:
    """Close the connections this event loop opened for turns. Never raises: a failing close
    must not hold up a shutdown."""
    for close, what in (
        (turn_store_close, "the turn store"),
        (adapters_close, "the adapters"),
        (task_publish_close, "the task queue"),
    ):
        try:
            await close()
        except Exception:
            logger.exception("closing the connections of %s failed", what)
