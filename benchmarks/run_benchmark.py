"""Run the benchmark end to end and report it next to the TypeScript runtime's figures.

    python -m benchmarks.run_benchmark [--duration 15] [--warmup 3] [--configs 1x200,50x50]
                                       [--executors inline,celery] [--worker-concurrency 2]
                                       [--protocols graphql,agui]
                                       [--profile] [--output benchmarks/results/latest.json]

Each configuration is measured for each protocol (``--protocols``, default both): ``graphql``
is v1 (``generateCopilotResponse``, next to the TypeScript runtime 1.10.6), ``agui`` is v2 (the
AG-UI run endpoint, next to the TypeScript runtime 1.75).

Starts the fake upstream (no token delay), migrates, serves
``copilot_runtime.site.asgi:application``
with daphne as production does (``DEBUG=false``, ``LOG_LEVEL=WARNING``, ``OPENAI_API_KEY=bench``,
``OPENAI_BASE_URL`` at the fake, no retries), then for each configuration runs the load
generator (``benchmarks.loadgen``) and samples the server over the measured window: daphne's
CPU (``/proc/<pid>/stat`` utime+stime) per request, its peak RSS (``VmHWM``), and, with the
throwaway database, PostgreSQL's CPU per request. Prints a table and writes JSON.

Each executor (``--executors``, default both) gets its own processes in turn
(``benchmarks.shapes``): ``inline`` is daphne alone; ``celery`` adds a throwaway redis-server
and ONE Celery worker (``-c --worker-concurrency``, prefork), daphne and the worker sharing the
environment plus ``REDIS_URL`` and ``COPILOT_RUNTIME_EXECUTOR=celery``. For the celery shape the
worker's process tree CPU, its memory and Redis's CPU are sampled too, and the two shapes are
compared side by side (``benchmarks.comparison``), with the TTFT the worker hop adds.

Database: ``DATABASE_URL`` when set (it must be PostgreSQL; the run writes rows into it),
otherwise a throwaway PostgreSQL set up like ``scripts/test.sh``'s (``benchmarks.postgres``).

``--profile`` then runs the 50x50 configuration (``--profile-config``) once more with
``py-spy record --gil`` attached to daphne and prints where the server's time goes
(``benchmarks.profile_summary``); py-spy is not a project dependency:
``.venv/bin/pip install py-spy``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import math
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import comparison, pgstats, procstat, profile_summary
from benchmarks.celery_processes import tree_memory
from benchmarks.loadgen import (
    AGUI,
    GRAPHQL,
    PROTOCOLS,
    Connection,
    LoadPlan,
    Target,
    run_load,
    send_one,
)
from benchmarks.postgres import PostgresUnavailable, ThrowawayPostgres, find_pg_bin
from benchmarks.processes import (
    REPO_ROOT,
    VENV_BIN,
    Managed,
    ProcessFailed,
    new_log_dir,
    run_migrate,
    start_fake_upstream,
)
from benchmarks.shapes import (
    CELERY,
    EXECUTORS,
    INLINE,
    Shape,
    WorkerOptions,
    parse_executors,
    start_shape,
)
from benchmarks.stats import LoadSummary

DEFAULT_OUTPUT = REPO_ROOT / "benchmarks" / "results" / "latest.json"
PROFILE_CONFIGURATION = "50x50"
PY_SPY_RATE_HZ = 200
# One prefork worker's pool size on this 2-core machine (4 served no more, in more memory).
DEFAULT_WORKER_CONCURRENCY = 2
MIB = 1024


@dataclass(frozen=True)
class Configuration:
    name: str
    concurrency: int
    tokens: int


CONFIGURATIONS = {
    "1x200": Configuration(name="1x200", concurrency=1, tokens=200),
    "50x50": Configuration(name="50x50", concurrency=50, tokens=50),
}

# The TypeScript runtime 1.10.6 (v1 GraphQL) on the same kind of 2-core machine, same load.
TYPESCRIPT_REFERENCE: dict[str, Any] = {
    "server": "CopilotKit TypeScript runtime 1.10.6 (v1 GraphQL)",
    "configurations": {
        "1x200": {"requests_per_second": 87, "ttft_p50_ms": 10},
        "50x50": {"requests_per_second": 270, "ttft_p50_ms": 180},
    },
    "cpu_ms_per_request": "4-11",
    "rss_mib": "280-310",
}

# The TypeScript runtime 1.75 (v2 AG-UI) on the same kind of 2-core machine, same load
# (issue 9, "Benchmark").
TYPESCRIPT_V2_REFERENCE: dict[str, Any] = {
    "server": "CopilotKit TypeScript runtime 1.75 (v2 AG-UI)",
    "configurations": {
        "1x200": {"requests_per_second": 37, "ttft_p50_ms": 23},
        "50x50": {"requests_per_second": 113, "ttft_p50_ms": 425},
    },
    "cpu_ms_per_request": "10-28",
    "rss_mib": "330-400",
}

REFERENCES = {GRAPHQL: TYPESCRIPT_REFERENCE, AGUI: TYPESCRIPT_V2_REFERENCE}


class BenchmarkError(RuntimeError):
    """The benchmark cannot run (no database) or the server misbehaved."""


# --- environment ------------------------------------------------------------------------------


def _is_postgres_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in {"postgres", "postgresql", "pgsql", "postgis"}


def server_environment(*, database_url: str, fake_port: int) -> dict[str, str]:
    """The daphne/migrate environment: ours minus Redis/broker/OpenAI, plus the bench knobs."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"REDIS_URL", "CELERY_BROKER_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
    }
    env.update(
        {
            "DATABASE_URL": database_url,
            "OPENAI_API_KEY": "bench",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{fake_port}/v1",
            "COPILOT_RUNTIME_OPENAI_MAX_RETRIES": "0",
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "copilot_runtime.site.settings",
        }
    )
    return env


def _reported_environment(env: dict[str, str]) -> dict[str, str]:
    """The settings that shape the figures (never the database password)."""
    keys = {"DEBUG", "LOG_LEVEL", "CONN_MAX_AGE", "ENVIRONMENT", "OPENAI_MODEL"}
    return {
        name: value
        for name, value in sorted(env.items())
        if name in keys or name.startswith("COPILOT_RUNTIME_")
    }


def _machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


# --- sampling over the window -----------------------------------------------------------------


class WindowSampler:
    """CPU of the server (and, for the celery shape, the worker's process tree and Redis),
    PostgreSQL and the fake upstream, and the database's counters, between the window's
    edges."""

    def __init__(
        self,
        *,
        server_pid: int,
        postgres_pid: int | None,
        fake_pid: int,
        database_url: str,
        worker_pid: int | None = None,
        redis_pid: int | None = None,
    ) -> None:
        self.server_pid = server_pid
        self.postgres_pid = postgres_pid
        self.fake_pid = fake_pid
        self.database_url = database_url
        self.worker_pid = worker_pid
        self.redis_pid = redis_pid
        self._start: dict[str, float] = {}
        self._database_start: dict[str, int] | None = None
        self.deltas: dict[str, float] = {}
        self.database_deltas: dict[str, int] = {}

    @classmethod
    def for_shape(
        cls, shape: Shape, *, postgres_pid: int | None, fake_pid: int, database_url: str
    ) -> WindowSampler:
        return cls(
            server_pid=shape.server.pid,
            postgres_pid=postgres_pid,
            fake_pid=fake_pid,
            database_url=database_url,
            worker_pid=shape.worker.pid if shape.worker else None,
            redis_pid=shape.redis.pid if shape.redis else None,
        )

    def _sample(self) -> dict[str, float]:
        sample = {
            "machine_busy": procstat.machine_busy_seconds(),
            "server": procstat.cpu_times(self.server_pid).own,
            "fake_upstream": procstat.cpu_times(self.fake_pid).own,
            "load_generator": procstat.own_cpu_seconds(),
        }
        if self.postgres_pid is not None:
            sample["postgres"] = procstat.tree_cpu_seconds(self.postgres_pid)
        if self.worker_pid is not None:
            # The worker's main process and its pool children (prefork executes runs there).
            sample["worker"] = procstat.tree_cpu_seconds(self.worker_pid)
        if self.redis_pid is not None:
            sample["redis"] = procstat.cpu_times(self.redis_pid).own
        return sample

    def foreign_cpu_seconds(self) -> float | None:
        """CPU the machine spent on processes that are not part of the benchmark."""
        if not self.deltas or self.postgres_pid is None:
            return None
        ours = sum(value for name, value in self.deltas.items() if name != "machine_busy")
        return max(0.0, self.deltas["machine_busy"] - ours)

    def start(self) -> None:
        self._database_start = pgstats.database_counters(self.database_url)
        self._start = self._sample()

    def end(self) -> None:
        end = self._sample()
        self.deltas = {name: end[name] - self._start[name] for name in end}
        database_end = pgstats.database_counters(self.database_url)
        if self._database_start is not None and database_end is not None:
            self.database_deltas = {
                name: database_end[name] - self._database_start[name] for name in database_end
            }


def _per_request_ms(seconds: float | None, requests: int) -> float | None:
    if seconds is None or requests == 0:
        return None
    return round(seconds * 1000 / requests, 3)


def _percent_of_core(seconds: float | None, window_seconds: float) -> float | None:
    if seconds is None or not window_seconds:
        return None
    return round(100 * seconds / window_seconds, 1)


def _worker_figures(
    shape: Shape, sampler: WindowSampler, completed: int, window_seconds: float
) -> dict[str, Any]:
    """The celery shape's worker and Redis, and what the runtime costs in all (web + worker)."""
    if shape.worker is None:
        return {}
    memory = tree_memory(shape.worker.pid)
    worker_cpu = sampler.deltas.get("worker")
    server_cpu = sampler.deltas.get("server")
    runtime_cpu = None if worker_cpu is None or server_cpu is None else worker_cpu + server_cpu
    return {
        "worker_cpu_ms_per_request": _per_request_ms(worker_cpu, completed),
        "worker_cpu_percent_of_core": _percent_of_core(worker_cpu, window_seconds),
        "runtime_cpu_ms_per_request": _per_request_ms(runtime_cpu, completed),
        "redis_cpu_ms_per_request": _per_request_ms(sampler.deltas.get("redis"), completed),
        # Sum of each process's VmHWM: an upper bound (peaks at different moments, pages the
        # pool children share with the parent counted in each).
        "worker_peak_rss_mib": round(memory.peak_rss_kib_sum / MIB, 1),
        "worker_peak_rss_mib_by_process": [
            round(kib / MIB, 1) for kib in memory.peak_rss_kib_by_process.values()
        ],
        "worker_rss_mib_after": round(memory.rss_kib / MIB, 1),
        # Proportional set size: shared pages divided among the processes sharing them.
        "worker_pss_mib_after": None if memory.pss_kib is None else round(memory.pss_kib / MIB, 1),
        "worker_processes": len(memory.peak_rss_kib_by_process),
    }


def _configuration_result(
    configuration: Configuration,
    summary: LoadSummary,
    sampler: WindowSampler,
    shape: Shape,
    protocol: str = GRAPHQL,
) -> dict[str, Any]:
    memory = procstat.memory_kib(shape.server.pid)
    completed = summary.completed
    foreign = sampler.foreign_cpu_seconds()
    return {
        "name": configuration.name,
        "executor": shape.executor,
        "protocol": protocol,
        **summary.as_dict(),
        "server_cpu_ms_per_request": _per_request_ms(sampler.deltas.get("server"), completed),
        "server_cpu_percent_of_core": round(
            100 * sampler.deltas.get("server", 0.0) / summary.window_seconds, 1
        )
        if summary.window_seconds
        else None,
        "postgres_cpu_ms_per_request": _per_request_ms(sampler.deltas.get("postgres"), completed),
        "fake_upstream_cpu_ms_per_request": _per_request_ms(
            sampler.deltas.get("fake_upstream"), completed
        ),
        "postgres_per_request": {
            name: round(value / completed, 2) for name, value in sampler.database_deltas.items()
        }
        if completed and sampler.database_deltas
        else None,
        "server_peak_rss_mib": round(memory.get("VmHWM", 0) / MIB, 1),
        # Other processes on the machine during the window (other jobs skew the figures).
        "foreign_cpu_percent_of_core": None
        if foreign is None or not summary.window_seconds
        else round(100 * foreign / summary.window_seconds, 1),
        "load_average_after": [round(value, 2) for value in os.getloadavg()],
        "server_rss_mib_after": round(memory.get("VmRSS", 0) / MIB, 1),
        **_worker_figures(shape, sampler, completed, summary.window_seconds),
    }


async def _check_server_answers(target: Target) -> None:
    """One small request must stream to Success before anything is measured."""
    connection = await Connection.open(target)
    try:
        result = await send_one(connection, target=target, tokens=5, timeout_seconds=30)
    finally:
        await connection.close()
    if not result.ok:
        raise BenchmarkError(f"the server's answer to a first request was wrong: {result.error}")


def measure(
    configuration: Configuration,
    *,
    shape: Shape,
    warmup_seconds: float,
    duration_seconds: float,
    postgres_pid: int | None,
    fake: Managed,
    database_url: str,
    protocol: str = GRAPHQL,
) -> dict[str, Any]:
    sampler = WindowSampler.for_shape(
        shape, postgres_pid=postgres_pid, fake_pid=fake.pid, database_url=database_url
    )
    plan = LoadPlan(
        concurrency=configuration.concurrency,
        tokens=configuration.tokens,
        warmup_seconds=warmup_seconds,
        duration_seconds=duration_seconds,
    )
    summary = asyncio.run(
        run_load(
            target=shape.target.with_protocol(protocol),
            plan=plan,
            on_window_start=sampler.start,
            on_window_end=sampler.end,
        )
    )
    return _configuration_result(configuration, summary, sampler, shape, protocol)


# --- profile ----------------------------------------------------------------------------------


def _py_spy() -> str | None:
    candidate = VENV_BIN / "py-spy"
    return str(candidate) if candidate.exists() else shutil.which("py-spy")


def profile_server(
    *,
    shape: Shape,
    warmup_seconds: float,
    duration_seconds: float,
    postgres_pid: int | None,
    fake: Managed,
    database_url: str,
    output_dir: Path,
    configuration: Configuration,
) -> dict[str, Any]:
    """One configuration's load once more with py-spy sampling daphne; returns the summary."""
    server = shape.server
    py_spy = _py_spy()
    if py_spy is None:
        raise BenchmarkError("--profile needs py-spy: .venv/bin/pip install py-spy")
    # The inline shape keeps the historical names (profile-50x50.*).
    stem = (
        f"profile-{configuration.name}"
        if shape.executor == INLINE
        else f"profile-{shape.executor}-{configuration.name}"
    )
    raw_path = output_dir / f"{stem}.collapsed.txt"
    seconds = max(1, math.ceil(duration_seconds))
    recorder: list[subprocess.Popen[bytes]] = []
    sampler = WindowSampler.for_shape(
        shape, postgres_pid=postgres_pid, fake_pid=fake.pid, database_url=database_url
    )

    def start_recording() -> None:
        sampler.start()
        recorder.append(
            subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--pid",
                    str(server.pid),
                    "--duration",
                    str(seconds),
                    "--rate",
                    str(PY_SPY_RATE_HZ),
                    "--format",
                    "raw",
                    "--gil",
                    "--output",
                    str(raw_path),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        )

    plan = LoadPlan(
        concurrency=configuration.concurrency,
        tokens=configuration.tokens,
        warmup_seconds=warmup_seconds,
        duration_seconds=float(seconds),
    )
    summary = asyncio.run(
        run_load(
            target=shape.target,
            plan=plan,
            on_window_start=start_recording,
            on_window_end=sampler.end,
        )
    )
    if not recorder:
        raise BenchmarkError("py-spy was never started")
    try:
        _, stderr = recorder[0].communicate(timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        recorder[0].kill()
        recorder[0].wait()
        raise BenchmarkError("py-spy did not finish") from None
    if recorder[0].returncode != 0 or not raw_path.exists():
        raise BenchmarkError(f"py-spy failed: {stderr.decode(errors='replace')[-2000:]}")
    breakdown = profile_summary.summarize_file(raw_path)
    text = profile_summary.render(
        breakdown,
        heading=(
            f"py-spy --gil samples of daphne ({shape.executor} executor) under "
            f"{configuration.name} load "
            f"({PY_SPY_RATE_HZ} Hz x {seconds} s; a sample = the thread holding the GIL)"
        ),
    )
    text_path = output_dir / f"{stem}.txt"
    text_path.write_text(text)
    loaded = _configuration_result(configuration, summary, sampler, shape)
    return {
        "configuration": configuration.name,
        "executor": shape.executor,
        "note": "measured while py-spy sampled the server (slows it); not the headline figures",
        "under_profiler": {
            key: loaded[key]
            for key in ("requests_per_second", "server_cpu_ms_per_request", "failed")
        },
        # Next to the JSON report.
        "collapsed_stacks": raw_path.name,
        "summary_text": text_path.name,
        **breakdown.as_dict(),
    }


# --- report -----------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def render_table(results: list[dict[str, Any]]) -> str:
    columns = (
        ("config", "", 7),
        ("executor", "", 8),
        ("proto", "", 7),
        ("req/s", "", 7),
        ("TTFT p50", "ms", 9),
        ("TTFT p95", "ms", 9),
        ("lat p50", "ms", 8),
        ("lat p95", "ms", 8),
        ("srv CPU", "ms/req", 8),
        ("srv CPU", "% core", 8),
        ("peak RSS", "MiB", 9),
        ("wrk CPU", "ms/req", 8),
        ("wrk RSS", "MiB", 8),
        ("pg CPU", "ms/req", 7),
        ("pg conn", "per req", 8),
        ("pg xact", "per req", 8),
        ("failed", "", 6),
        ("others", "% core", 7),
        ("| TS req/s", "", 10),
        ("TS TTFT", "p50 ms", 8),
    )
    header = " ".join(f"{name:>{width}}" for name, _, width in columns)
    units = " ".join(f"{unit:>{width}}" for _, unit, width in columns)
    lines = [header, units, "-" * len(header)]
    for result in results:
        protocol = result.get("protocol", GRAPHQL)
        reference = REFERENCES[protocol]["configurations"].get(result["name"], {})
        database = result.get("postgres_per_request") or {}
        values = (
            result["name"],
            result.get("executor", INLINE),
            protocol,
            _fmt(result["requests_per_second"]),
            _fmt(result["ttft"]["p50_ms"]),
            _fmt(result["ttft"]["p95_ms"]),
            _fmt(result["latency"]["p50_ms"]),
            _fmt(result["latency"]["p95_ms"]),
            _fmt(result["server_cpu_ms_per_request"], 2),
            _fmt(result["server_cpu_percent_of_core"]),
            _fmt(result["server_peak_rss_mib"]),
            _fmt(result.get("worker_cpu_ms_per_request"), 2),
            _fmt(result.get("worker_peak_rss_mib")),
            _fmt(result["postgres_cpu_ms_per_request"], 2),
            _fmt(database.get("sessions"), 2),
            _fmt(database.get("transactions"), 2),
            str(result["failed"]),
            _fmt(result["foreign_cpu_percent_of_core"]),
            "| " + _fmt(reference.get("requests_per_second")),
            _fmt(reference.get("ttft_p50_ms")),
        )
        lines.append(
            " ".join(
                f"{value:>{width}}" for value, (_, _, width) in zip(values, columns, strict=True)
            )
        )
    lines.append(
        f"TypeScript runtime 1.10.6 (graphql): {TYPESCRIPT_REFERENCE['cpu_ms_per_request']} ms "
        f"CPU/request, {TYPESCRIPT_REFERENCE['rss_mib']} MiB RSS; 1.75 (agui): "
        f"{TYPESCRIPT_V2_REFERENCE['cpu_ms_per_request']} ms CPU/request, "
        f"{TYPESCRIPT_V2_REFERENCE['rss_mib']} MiB RSS."
    )
    lines.append(
        "srv = daphne; wrk = the Celery worker's process tree (CPU over the window, peak RSS as "
        "the sum of each process's VmHWM)."
    )
    lines.append(
        "'others': CPU used by processes outside the benchmark during the window (of 200% on "
        "2 cores); figures taken while it is high are not comparable."
    )
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_benchmark", description=__doc__)
    parser.add_argument("--duration", type=float, default=15.0, help="measured s per config")
    parser.add_argument("--warmup", type=float, default=3.0, help="warm-up s per config")
    parser.add_argument(
        "--configs",
        default=",".join(CONFIGURATIONS),
        help=f"comma-separated, from {', '.join(CONFIGURATIONS)}",
    )
    parser.add_argument(
        "--protocols",
        default=",".join(PROTOCOLS),
        help="comma-separated, from graphql (v1), agui (v2) (default both, in that order)",
    )
    parser.add_argument("--profile", action="store_true", help="also profile with py-spy")
    parser.add_argument(
        "--profile-config",
        choices=sorted(CONFIGURATIONS),
        default=PROFILE_CONFIGURATION,
        help="the configuration run under py-spy (default 50x50)",
    )
    parser.add_argument(
        "--profile-duration", type=float, default=None, help="seconds (default: --duration)"
    )
    parser.add_argument(
        "--executors",
        default=",".join(EXECUTORS),
        help="comma-separated, from inline, celery (default both, in that order)",
    )
    parser.add_argument(
        "--worker-concurrency",
        type=int,
        default=DEFAULT_WORKER_CONCURRENCY,
        help=f"the Celery worker's -c (default {DEFAULT_WORKER_CONCURRENCY})",
    )
    parser.add_argument(
        "--worker-pool", default="prefork", help="the Celery worker's -P (default prefork)"
    )
    parser.add_argument(
        "--profile-executor",
        choices=EXECUTORS,
        default=None,
        help="whose daphne py-spy samples (default: the first of --executors)",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--keep-logs", action="store_true", help="print the log directory")
    return parser


@dataclass
class LogDirectory:
    """The subprocesses' logs: deleted at the end unless ``keep`` (asked for, or trouble)."""

    path: Path
    keep: bool

    def close(self) -> None:
        if self.keep:
            print(f"==> logs kept in {self.path}", file=sys.stderr)
        else:
            shutil.rmtree(self.path, ignore_errors=True)


def _check_alive(*processes: Managed) -> None:
    for managed in processes:
        if managed.process.poll() is not None:
            raise BenchmarkError(
                f"{managed.name} exited ({managed.process.returncode}) during the run\n"
                f"{managed.output_tail()}"
            )


def _configurations(raw: str) -> list[Configuration]:
    names = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = [name for name in names if name not in CONFIGURATIONS]
    if unknown or not names:
        raise BenchmarkError(f"unknown configuration(s) {unknown}; known: {list(CONFIGURATIONS)}")
    return [CONFIGURATIONS[name] for name in names]


def _database(stack: contextlib.ExitStack) -> tuple[str, ThrowawayPostgres | None]:
    configured = os.environ.get("DATABASE_URL", "").strip()
    if configured:
        if not _is_postgres_url(configured):
            raise BenchmarkError(
                "DATABASE_URL must point at PostgreSQL (postgres://...); the benchmark measures "
                "the production setup. Unset it to let the benchmark start a throwaway one."
            )
        return configured, None
    pg_bin = find_pg_bin()
    if pg_bin is None:
        raise BenchmarkError(
            "no DATABASE_URL and no PostgreSQL binaries (initdb) to start a throwaway one: "
            "install postgresql or set DATABASE_URL=postgres://user:pass@host:port/db."
        )
    postgres = stack.enter_context(ThrowawayPostgres(pg_bin))
    print(f"==> starting a throwaway PostgreSQL ({pg_bin})", file=sys.stderr)
    return postgres.start(), postgres


def _measure_shape(
    shape: Shape,
    *,
    arguments: argparse.Namespace,
    configurations: list[Configuration],
    postgres_pid: int | None,
    fake: Managed,
    database_url: str,
    protocols: Sequence[str] = (GRAPHQL,),
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Every configuration against one shape, and its profile when asked for."""
    print(
        f"==> {shape.executor}: daphne pid {shape.server.pid} on "
        f"{shape.target.host}:{shape.target.port}"
        + (f", celery worker pid {shape.worker.pid}" if shape.worker else ""),
        file=sys.stderr,
    )
    try:
        for protocol in protocols:
            asyncio.run(_check_server_answers(shape.target.with_protocol(protocol)))
    except BenchmarkError as error:
        tails = "\n".join(managed.output_tail() for managed in shape.processes)
        raise BenchmarkError(f"{shape.executor}: {error}\n{tails}") from error

    results = []
    for protocol in protocols:
        for configuration in configurations:
            print(
                f"==> {shape.executor} {protocol} {configuration.name}: "
                f"{configuration.concurrency} client(s) x {configuration.tokens} tokens, "
                f"{arguments.warmup:g} s warm-up + {arguments.duration:g} s",
                file=sys.stderr,
            )
            results.append(
                measure(
                    configuration,
                    shape=shape,
                    warmup_seconds=arguments.warmup,
                    duration_seconds=arguments.duration,
                    postgres_pid=postgres_pid,
                    fake=fake,
                    database_url=database_url,
                    protocol=protocol,
                )
            )
            _check_alive(*shape.processes, fake)

    profile = None
    if arguments.profile and arguments.profile_executor == shape.executor:
        print(f"==> profiling {arguments.profile_config} with py-spy", file=sys.stderr)
        arguments.output.parent.mkdir(parents=True, exist_ok=True)
        profile = profile_server(
            shape=shape,
            warmup_seconds=arguments.warmup,
            duration_seconds=arguments.profile_duration or arguments.duration,
            postgres_pid=postgres_pid,
            fake=fake,
            database_url=database_url,
            output_dir=arguments.output.parent,
            configuration=CONFIGURATIONS[arguments.profile_config],
        )
    _check_alive(*shape.processes, fake)
    return results, profile


def _shape_settings(shape: Shape) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "server": "daphne copilot_runtime.site.asgi:application (1 process)",
        "server_environment": _reported_environment(shape.env),
    }
    if shape.executor == CELERY and shape.worker_options is not None:
        settings.update(
            {
                "worker": (
                    "celery -A copilot_runtime.site worker -l warning "
                    f"-P {shape.worker_options.pool} -c {shape.worker_options.concurrency} "
                    "--without-mingle --without-gossip (1 worker)"
                ),
                "worker_concurrency": shape.worker_options.concurrency,
                "worker_pool": shape.worker_options.pool,
                "broker_and_channel_layer": "throwaway redis-server (no persistence)",
            }
        )
    else:
        settings["channel_layer"] = "in-memory (no REDIS_URL)"
    return settings


def _protocols(raw: str) -> list[str]:
    names = list(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))
    unknown = [name for name in names if name not in PROTOCOLS]
    if unknown or not names:
        raise BenchmarkError(f"unknown protocol(s) {unknown}; known: {list(PROTOCOLS)}")
    return names


def run(arguments: argparse.Namespace) -> dict[str, Any]:
    configurations = _configurations(arguments.configs)
    protocols = _protocols(arguments.protocols)
    try:
        executors = parse_executors(arguments.executors)
    except ValueError as error:
        raise BenchmarkError(str(error)) from None
    if arguments.worker_concurrency < 1:
        raise BenchmarkError("--worker-concurrency must be at least 1")
    if arguments.profile_executor is None:
        arguments.profile_executor = executors[0]
    if arguments.profile and arguments.profile_executor not in executors:
        raise BenchmarkError(f"--profile-executor {arguments.profile_executor} is not being run")
    worker_options = WorkerOptions(
        concurrency=arguments.worker_concurrency, pool=arguments.worker_pool
    )
    logs = LogDirectory(path=new_log_dir(), keep=True)  # kept unless the run goes well
    results: list[dict[str, Any]] = []
    profile = None
    shapes: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        stack.callback(logs.close)
        database_url, postgres = _database(stack)
        fake, fake_port = start_fake_upstream(env=dict(os.environ), log_dir=logs.path)
        stack.callback(fake.stop)
        base_env = server_environment(database_url=database_url, fake_port=fake_port)
        print("==> manage.py migrate", file=sys.stderr)
        run_migrate(env=base_env, log_dir=logs.path)
        postgres_pid = postgres.postmaster_pid() if postgres is not None else None

        for executor in executors:
            # Each shape's processes are stopped before the next one starts (and on failure).
            with contextlib.ExitStack() as shape_stack:
                print(f"==> starting the {executor} shape", file=sys.stderr)
                shape = start_shape(
                    executor,
                    base_env=base_env,
                    log_dir=logs.path / executor,
                    stack=shape_stack,
                    worker_options=worker_options,
                )
                shape_results, shape_profile = _measure_shape(
                    shape,
                    arguments=arguments,
                    configurations=configurations,
                    postgres_pid=postgres_pid,
                    fake=fake,
                    database_url=database_url,
                    protocols=protocols,
                )
                results.extend(shape_results)
                profile = shape_profile or profile
                shapes[executor] = _shape_settings(shape)
        logs.keep = arguments.keep_logs or any(result["failed"] for result in results)

    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "settings": {
            "warmup_seconds": arguments.warmup,
            "duration_seconds": arguments.duration,
            "database": "throwaway PostgreSQL (fsync off)" if postgres else "DATABASE_URL",
            "executors": shapes,
            # The first shape's, as before the celery shape existed.
            **next(iter(shapes.values()), {}),
        },
        "protocols": protocols,
        "configurations": results,
        # v1 under the historical key; v2 next to it.
        "inline_vs_celery": comparison.side_by_side(
            [result for result in results if result["protocol"] == GRAPHQL]
        ),
        "inline_vs_celery_agui": comparison.side_by_side(
            [result for result in results if result["protocol"] == AGUI]
        ),
        "typescript_reference": TYPESCRIPT_REFERENCE,
        "typescript_v2_reference": TYPESCRIPT_V2_REFERENCE,
        "profile": profile,
    }


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    try:
        report = run(arguments)
    except (BenchmarkError, PostgresUnavailable, ProcessFailed) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    print(render_table(report["configurations"]))
    for key in ("inline_vs_celery", "inline_vs_celery_agui"):
        if report[key]["configurations"]:
            print()
            print(comparison.render(report[key]))
    if report["profile"] is not None:
        print()
        print((arguments.output.parent / report["profile"]["summary_text"]).read_text())
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {arguments.output}")
    failed = sum(result["failed"] for result in report["configurations"])
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
