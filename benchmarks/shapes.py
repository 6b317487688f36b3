"""The two ways the runtime is served, as the benchmark starts them.

``inline``: one daphne, runs execute as asyncio tasks in it, in-memory channel layer.
``celery``: a throwaway redis-server (broker and channel layer), ONE Celery worker and one
daphne, both with the same environment plus ``REDIS_URL`` and ``COPILOT_RUNTIME_EXECUTOR=celery``;
daphne records the run and relays the worker's events (event log + channel layer).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmarks.celery_processes import start_celery_worker, start_redis, stop_worker
from benchmarks.loadgen import Target
from benchmarks.postgres import free_port
from benchmarks.processes import Managed, start_daphne

INLINE = "inline"
CELERY = "celery"
EXECUTORS = (INLINE, CELERY)


@dataclass(frozen=True)
class WorkerOptions:
    concurrency: int
    pool: str = "prefork"


@dataclass(frozen=True)
class Shape:
    """The processes serving one executor, and where to send the load."""

    executor: str
    target: Target
    env: dict[str, str]
    server: Managed
    worker: Managed | None = None
    redis: Managed | None = None
    worker_options: WorkerOptions | None = None

    @property
    def processes(self) -> list[Managed]:
        return [managed for managed in (self.server, self.worker, self.redis) if managed]


def parse_executors(raw: str) -> list[str]:
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    unknown = [name for name in names if name not in EXECUTORS]
    if unknown or not names:
        raise ValueError(f"unknown executor(s) {unknown}; known: {list(EXECUTORS)}")
    return list(dict.fromkeys(names))


def executor_environment(
    base: Mapping[str, str], *, executor: str, redis_url: str | None = None
) -> dict[str, str]:
    """``base`` (which has no Redis) with the executor chosen explicitly."""
    env = dict(base)
    env["COPILOT_RUNTIME_EXECUTOR"] = executor
    if executor == CELERY:
        if not redis_url:
            raise ValueError("the celery executor needs a Redis URL")
        env["REDIS_URL"] = redis_url
    return env


def start_shape(
    executor: str,
    *,
    base_env: Mapping[str, str],
    log_dir: Path,
    stack: contextlib.ExitStack,
    worker_options: WorkerOptions,
) -> Shape:
    """Start the executor's processes; each is stopped by ``stack`` (daphne first, then the
    worker, then Redis), also when a later one fails to start."""
    log_dir.mkdir(parents=True, exist_ok=True)
    redis = worker = None
    if executor == CELERY:
        redis_port = free_port()
        redis = start_redis(port=redis_port, log_dir=log_dir)
        stack.callback(redis.stop)
        env = executor_environment(
            base_env, executor=executor, redis_url=f"redis://127.0.0.1:{redis_port}/0"
        )
        worker = start_celery_worker(
            env=env,
            log_dir=log_dir,
            concurrency=worker_options.concurrency,
            pool=worker_options.pool,
        )
        stack.callback(stop_worker, worker)
    else:
        env = executor_environment(base_env, executor=executor)
    port = free_port()
    server = start_daphne(port=port, env=env, log_dir=log_dir)
    stack.callback(server.stop)
    return Shape(
        executor=executor,
        target=Target(host="127.0.0.1", port=port),
        env=env,
        server=server,
        worker=worker,
        redis=redis,
        worker_options=worker_options if executor == CELERY else None,
    )
