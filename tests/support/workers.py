"""What one pytest-xdist worker owns of the machine, so that workers never meet.

``scripts/test.sh`` runs the suite on several workers (``pytest -n``). Each worker has

- its own PostgreSQL test database: pytest-django names it ``test_<name>_gw<N>``, and every
  served process gets the database the test's connection points at
  (``tests/e2e/conftest.py``'s ``current_database_url()``);
- its own Redis *server*: ``scripts/test.sh`` starts one per worker and lists them in
  ``TEST_REDIS_URLS``; ``claim_redis()`` makes the worker's own the ``TEST_REDIS_URL`` this
  process sees. A server, not a database number: pub/sub channels, ``PUBSUB CHANNELS`` and
  ``FLUSHALL`` are server-wide, and the tests use database numbers 0-15 of their own. A worker
  without one listed (``pytest -n`` run by hand) starts one itself;
- its own block of TCP ports (``free_port()``), below the kernel's ephemeral range, so that a
  port one worker picked for a server is never picked by another worker, nor taken meanwhile by
  an outgoing connection's local port.

Outside xdist (``-n 0``, or plain ``pytest``) the worker index is 0 and nothing changes, unless
``TEST_WORKER_INDEX`` names one: ``scripts/test.sh`` runs the ``serial`` tests in a process of
their own beside the parallel run, as worker ``TEST_WORKER_INDEX`` (one past the last xdist
worker), with the Redis server listed at that index and that block of ports.
"""

from __future__ import annotations

import itertools
import os
import socket
import tempfile
import threading
from pathlib import Path

# Ports 10000-31999, below Linux's default ephemeral range (32768-60999): 550 per worker, up to
# 40 workers.
PORTS_FROM = 10_000
PORTS_PER_WORKER = 550
MAX_WORKERS = 40
# The Fetch standard's "bad ports" at or above PORTS_FROM: browsers and Node's fetch refuse to
# connect to them (Chromium: ERR_UNSAFE_PORT).
BAD_PORTS = frozenset({10080})


def worker_id() -> str:
    """``gw0``, ``gw1``, ... under pytest-xdist; ``master`` otherwise (pytest-xdist's name)."""
    return os.environ.get("PYTEST_XDIST_WORKER", "master")


def worker_index() -> int:
    name = worker_id()
    if name.startswith("gw"):
        return int(name[2:])
    return int(os.environ.get("TEST_WORKER_INDEX", "0"))


def worker_count() -> int:
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


# --- ports ----------------------------------------------------------------------------------------

_port_lock = threading.Lock()
_port_offsets = itertools.count()


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback TCP port nothing listens on, from this worker's own block (each call a new
    one, round the block)."""
    index = worker_index()
    if index >= MAX_WORKERS:
        raise RuntimeError(f"worker {worker_id()}: at most {MAX_WORKERS} workers have ports")
    first = PORTS_FROM + index * PORTS_PER_WORKER
    with _port_lock:
        for _ in range(PORTS_PER_WORKER):
            port = first + next(_port_offsets) % PORTS_PER_WORKER
            if port not in BAD_PORTS and _bindable(port):
                return port
    raise RuntimeError(f"no free port in {first}-{first + PORTS_PER_WORKER - 1}")


# --- Redis ----------------------------------------------------------------------------------------

_own_redis = None


def claim_redis() -> None:
    """Point ``TEST_REDIS_URL`` at this worker's own Redis server (see the module's doc)."""
    global _own_redis
    if not os.environ.get("TEST_REDIS_URL"):
        return
    if worker_id() == "master" and "TEST_WORKER_INDEX" not in os.environ:
        return
    listed = os.environ.get("TEST_REDIS_URLS", "").split()
    index = worker_index()
    if index < len(listed):
        os.environ["TEST_REDIS_URL"] = listed[index]
        return
    from tests.support.redis_server import RedisServer

    work_dir = Path(tempfile.mkdtemp(prefix=f"redis-{worker_id()}-"))
    _own_redis = RedisServer(port=free_port(), work_dir=work_dir)
    _own_redis.start()
    os.environ["TEST_REDIS_URL"] = _own_redis.url


def release_redis() -> None:
    global _own_redis
    if _own_redis is not None:
        _own_redis.stop()
        _own_redis = None
