"""A worker's claim on a run it was handed for the first time, taken in Redis.

A worker must be the only one to execute a run: a task may be delivered twice (a push that
timed out after it landed is published again). Marking the run running in the database
(pending -> running) guarded that, at the cost of a statement, a transaction and a second new
version of the run's row per run. A task's fresh first delivery now claims its run with
``SET NX`` on the channel layer's Redis, the server it announces the run on, preferably in the
same script as the announcement of the run's first token (``claim_in_layer_announcing``: the
claim then costs no round trip of its own; engine/run_claim.py decides), and the run's start
is recorded with its first write (``RunStart``) or its first heartbeat, whichever comes first:
for a short run, with its end, in one statement: a worker does less per run, and serves more
runs a second.

Only where that is safe: a delivery the broker made again (its run may have started
elsewhere), a task that waited in the queue for half of ``PENDING_TIMEOUT_SECONDS`` (the
reaper fails a run still recorded pending after that long), and a process whose channel layer
is not Redis's pub/sub layer (or whose lane is closed: copilot_runtime/fastlane) claim in the
database, as before. The claim's key outlives every
fresh delivery of the task. A task's age is read from the web process's clock: the hosts'
clocks must agree to within seconds (NTP), as the reaper's timeouts already assume.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from channels.layers import get_channel_layer

from copilot_runtime.conf import runtime_setting
from copilot_runtime.fastlane.channels_redis import eval_with_groups, set_if_absent

KEY_PREFIX = "copilot-runtime:claim:"


def queued_now() -> float:
    """The time a task is queued at, as its placement carries it (``queued_at``)."""
    return time.time()


def claim_in_layer_allowed(placement: dict[str, Any] | None) -> bool:
    """Whether a first delivery of the task carrying ``placement`` may claim its run in Redis:
    it was queued recently (tasks of earlier versions carry no time, and claim as before)."""
    queued_at = (placement or {}).get("queued_at")
    if not isinstance(queued_at, int | float):
        return False
    return time.time() - queued_at < _fresh_for()


def _fresh_for() -> float:
    return float(runtime_setting("PENDING_TIMEOUT_SECONDS")) / 2


def _claim_ttl() -> int:
    # Expires once no fresh delivery of the task can come (see _fresh_for), with a margin.
    return max(1, round(float(runtime_setting("PENDING_TIMEOUT_SECONDS"))))


async def claim_in_layer(run_id: str) -> bool | None:
    """Take ``run_id`` for this delivery: True when it is this delivery's, False when another
    delivery took it first, None when the channel layer is not Redis's pub/sub layer with its
    lane open (claim in the database then). Raises what Redis raised."""
    layer = get_channel_layer()
    if layer is None:
        return None
    return await set_if_absent(layer, KEY_PREFIX + run_id, ttl=_claim_ttl())


# The claim, and only if it was taken, the announcements: one call, one round trip.
_CLAIM_AND_PUBLISH = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  for i = 2, #ARGV, 2 do
    redis.call('PUBLISH', ARGV[i], ARGV[i + 1])
  end
  return 1
end
return 0
"""


async def claim_in_layer_announcing(
    run_id: str, messages: Sequence[tuple[str, dict[str, Any]]]
) -> bool | None:
    """``claim_in_layer``, publishing ``messages`` (group, message: what ``group_send_many``
    would send) if and only if the claim is taken, in the same round trip. None, with nothing
    sent, where the claim and every group are not on one Redis of a pub/sub layer."""
    layer = get_channel_layer()
    if layer is None:
        return None
    taken = await eval_with_groups(
        layer, _CLAIM_AND_PUBLISH, KEY_PREFIX + run_id, [_claim_ttl()], messages
    )
    return None if taken is NotImplemented else bool(taken)
