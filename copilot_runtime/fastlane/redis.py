"""The redis-py lane: one Redis command, on its way to Redis before the caller first waits.

redis-py's asyncio client (8.x) runs each command through more than the command: it takes a
pooled connection under the pool's lock and checks it for unread data (a read under a zero
timeout, a turn or two of the event loop), records the call's duration and the connections'
counts for its metrics, and dispatches an event when it gives the connection back. That is
more CPU per command than writing the command and reading its reply take, and the command
reaches its socket only after those turns of the loop, whatever else the loop does meanwhile.

On a run's way this matters twice: the web's push of the run's task, and the worker's script
that claims the run and announces its first token. A model answering at once hands the run
its whole reply in one read, and the run parsed all of it during those turns, before the
script was written, delaying the relayed first token. Here the command
is written at once, and only its reply is waited for.

What redis-py's client does besides is left out on purpose: its retries (each caller already
has its own way when Redis fails: the task goes by Celery's publish, the claim is taken in the
database) and its metrics. A connection a command failed or was cancelled on is closed before
it goes back to the pool, which is what the skipped check guards against; an error reply, read
whole, leaves it open.

It writes on the connection's own stream writer (``connection._writer``): with the lane closed
(copilot_runtime/fastlane), the command goes through ``execute_command``, whose reply some
commands' callbacks parse (``PING`` answers True there; the callers read none of those).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from copilot_runtime.fastlane import lane_open

if TYPE_CHECKING:
    from redis.asyncio import Redis


async def command_at_once(client: Redis, *args: Any) -> Any:
    """``client.execute_command(*args)``'s reply, unparsed by the command's callback (an error
    reply raises ``redis.exceptions.ResponseError`` as there): the command is written to a
    pooled connection before the first wait."""
    if not lane_open("redis"):
        return await client.execute_command(*args)
    # On use: a web process on the inline executor never imports redis.
    from redis.exceptions import ResponseError

    pool = client.connection_pool
    connection = pool.get_available_connection()
    try:
        if not connection.is_connected:
            await connection.connect()
        # Not ``send_command``: under a socket timeout (channels_redis's pools have one) it
        # writes from a task of its own (``asyncio.wait_for``), which runs after the caller's
        # next wait. A transport takes the bytes at once; only a full buffer is waited for.
        # The connection's own writer (tests/copilot_runtime/fastlane/test_redis.py fails
        # with a tested redis-py that moved it).
        writer = connection._writer
        writer.writelines(connection.pack_command(*args))
        async with asyncio.timeout(connection.socket_timeout):
            await writer.drain()
        return await connection.read_response()
    except ResponseError:
        raise  # an error reply, read whole: the connection serves the next command
    except BaseException:
        # Half written, or its reply unread: no other command may follow on it.
        await connection.disconnect(nowait=True)
        raise
    finally:
        await pool.release(connection)
