"""``make bench``: the project beside the TypeScript runtimes, measured in one run.

Starts a throwaway PostgreSQL (or uses ``DATABASE_URL``), the fake upstream, the project as
``scripts/run.sh`` serves it (uvicorn, inline executor) and the two pinned TypeScript runtimes
(``benchmarks/peers``), then measures each row for TS and for the project alternately (TS,
ours, TS, ours... ``--rounds`` times; the median of the rounds is kept), with the same load
from the same load generator against the same fake upstream. Prints one table (TS, project,
ratio) and writes ``benchmarks/results/side_by_side.json``.

Rows (``--rows``, all by default):

- ``conv``: C users (``--users`` 50) each continuing its own thread (whole history re-sent),
  50-token replies, 40 turns per thread; v1 and v2: req/s, TTFT p50/p95, server CPU ms/req,
  peak RSS; beside them, not compared, what the rest of the machine spent per request (the
  load generator, the fake upstream, PostgreSQL: the project's storage cost, as TS stores
  nothing) and how busy both cores were, to tell the server's limit from the machine's.
- ``single``: one user, 200-token replies: req/s, TTFT p50.
- ``flat``: one user, a thread taken to ``--flat-turns`` (120) turns: server CPU and TTFT over
  its last ten turns, measured alternately with turns 2-11 of a new thread, and with turns
  2-11 of another new thread whose bodies are padded to the long thread's size (the target
  leaves the body's reading out: this tells the body's cost from the thread's).
- ``paced``: ``--paced-users`` (300) users at once, 100 tokens 20 ms apart (v2): failures,
  TTFT p95, server CPU ms/req; ``--big-users`` (1,000) the same for the project (and TS).
- ``host``: the ``conv`` load against a ``startproject`` host built by the documented steps
  (``benchmarks/host_row.py``), served under uvicorn and under daphne, alternated with TS and
  the standalone site: each host's req/s, TTFT, CPU and RSS against both.
- ``celery``: the project with a Celery worker (Redis; one process, the threads pool with the
  site's 50 run slots): TTFT p50 at C=1 against inline, req/s at C=users (v1) against TS v1,
  web + worker CPU ms/req, and req/s and TTFT at C=users with tokens 20 ms apart.

Server CPU is ``/proc/<pid>/stat`` utime+stime over the measured window (the worker's whole
process tree for the celery row), and for the one-thread row, where a turn costs a few
milliseconds, the threads' ``schedstat`` nanoseconds; RSS is ``VmHWM``. Absolute numbers
move 20 % and more from run to run on a shared 2-core machine: read the ratios, measured in
the same run. Under the table, two fixed loops (plain Python, plain JavaScript), timed before
the run and after it (``benchmarks/calibration.py``), say what kind of machine it ran on: the
ratios themselves move with it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import peers
from benchmarks.calibration import describe, machine_speed
from benchmarks.celery_processes import (
    find_redis_server,
    start_celery_worker,
    start_redis,
    stop_worker,
    tree_memory,
)
from benchmarks.conversation import (
    V1,
    V2,
    Conversation,
    LoadResult,
    conversation_load,
    new_session,
    send_turn,
)
from benchmarks.host_row import host_table_rows, start_hosts
from benchmarks.postgres import ThrowawayPostgres, find_pg_bin, free_port
from benchmarks.processes import (
    REPO_ROOT,
    Managed,
    new_log_dir,
    run_migrate,
    start_fake_upstream,
    start_process,
    start_server,
    wait_healthy,
)
from benchmarks.procstat import (
    cpu_times,
    machine_busy_seconds,
    memory_kib,
    own_cpu_seconds,
    threads_cpu_seconds,
    tree_cpu_seconds,
)
from benchmarks.table import OURS, TS, Row, format_table

DEFAULT_OUTPUT = REPO_ROOT / "benchmarks" / "results" / "side_by_side.json"
# The standalone site's default run slots of one worker process (CELERY_WORKER_CONCURRENCY).
WORKER_CONCURRENCY = 50


@dataclass
class Server:
    """One measured server: its base URL and the process(es) whose CPU and memory count."""

    name: str
    url: str
    managed: Managed
    tree: bool = False  # count the process's children too (a Celery worker's pool)
    extra: list[Managed] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        total = 0.0
        for managed in [self.managed, *self.extra]:
            total += tree_cpu_seconds(managed.pid) if self.tree else cpu_times(managed.pid).total
        return total

    def precise_cpu_seconds(self) -> float:
        """The measured process's CPU to the nanosecond (one turn's cost; see procstat)."""
        return threads_cpu_seconds(self.managed.pid)

    def peak_rss_mib(self) -> float:
        peaks = [memory_kib(self.managed.pid).get("VmHWM", 0)]
        peaks += [tree_memory(m.pid).peak_rss_kib_sum for m in self.extra]
        return sum(peaks) / 1024


@dataclass
class Bystanders:
    """What shares the two cores with the measured server: this process (the load generator),
    the fake upstream and PostgreSQL. Their CPU per request and how busy the whole machine was
    say whether a req/s figure is the server's limit or the machine's; PostgreSQL's share is
    the project's own cost (the TypeScript runtimes store nothing)."""

    fake_pid: int | None = None
    postgres_pid: int | None = None  # None when DATABASE_URL names an outside server

    def cpu_seconds(self) -> dict[str, float]:
        found = {"loadgen": own_cpu_seconds(), "fake": 0.0, "postgres": 0.0}
        for name, pid in (("fake", self.fake_pid), ("postgres", self.postgres_pid)):
            if pid is not None:
                with contextlib.suppress(OSError, ValueError):
                    found[name] = tree_cpu_seconds(pid)
        return found


BYSTANDERS = Bystanders()


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _summary(result: LoadResult, cpu_seconds: float) -> dict[str, Any]:
    ok = result.ok
    ttfts = [turn.ttft * 1000 for turn in ok if turn.ttft is not None]
    return {
        "requests": len(ok),
        "failures": len(result.failures),
        "failure_sample": [turn.failure for turn in result.failures[:3]],
        "req_s": len(ok) / result.seconds,
        "ttft_p50_ms": _percentile(ttfts, 0.5),
        "ttft_p95_ms": _percentile(ttfts, 0.95),
        "cpu_ms_per_req": (cpu_seconds * 1000 / len(ok)) if ok else None,
    }


def measure_load(server: Server, **load: Any) -> dict[str, Any]:
    """One load against ``server``; its CPU sampled over the measured window."""
    marks: dict[bool, dict[str, float]] = {}

    def on_window(opening: bool) -> None:
        marks[opening] = {
            "server": server.cpu_seconds(),
            **BYSTANDERS.cpu_seconds(),
            "busy": machine_busy_seconds(),
            "clock": time.monotonic(),
        }

    result = asyncio.run(conversation_load(base_url=server.url, on_window=on_window, **load))
    spent = {name: marks[False][name] - marks[True][name] for name in marks[True]}
    figures = _summary(result, spent["server"])
    figures["peak_rss_mib"] = server.peak_rss_mib()
    ok = len(result.ok)
    for name in ("loadgen", "fake", "postgres"):
        figures[f"{name}_cpu_ms_per_req"] = (spent[name] * 1000 / ok) if ok else None
    figures["machine_busy_pct"] = 100 * spent["busy"] / (spent["clock"] * (os.cpu_count() or 1))
    return figures


FLAT_WINDOW = 10


def flatness_schedule(turns: int, window: int = FLAT_WINDOW) -> list[tuple[str, str | None]]:
    """The one-thread row's turns in order: (thread, window measured or None).

    The long thread is taken, unmeasured, to ``turns - window`` turns; then its last ``window``
    turns are interleaved with turns 2 to ``window + 1`` of two new threads, "short" and
    "sized" (whose bodies are padded to the long thread's size), whose first turns go first,
    unmeasured. The three windows are measured at the same time, each of the three first in
    turn: measured one after the other, they were minutes apart, and this machine's speed
    drifts more than that between them."""
    steps: list[tuple[str, str | None]] = [("long", None)] * (turns - window)
    steps.extend([("short", None), ("sized", None)])
    triple = [("short", "early"), ("sized", "early_sized"), ("long", "late")]
    for index in range(window):
        shift = index % 3
        steps.extend(triple[shift:] + triple[:shift])
    return steps


def measure_flatness(server: Server, *, protocol: str, turns: int) -> dict[str, Any]:
    """One user, three threads: CPU and TTFT of turns 2-11 of two (one with bodies as large as
    the third's) and of the last ten turns of the third, ``turns`` long, measured alternately
    (``flatness_schedule``)."""

    async def run() -> dict[str, list[tuple[float, float, int]]]:
        measured: dict[str, list[tuple[float, float, int]]] = {
            "early": [],
            "early_sized": [],
            "late": [],
        }
        async with new_session(1) as session:
            threads = {
                name: Conversation(protocol, tokens=50) for name in ("long", "short", "sized")
            }
            for thread, window in flatness_schedule(turns):
                if thread == "sized":
                    # The long thread's last body; its next one is a turn (~0.5 %) longer.
                    threads["sized"].body_floor = threads["long"].last_body_size
                before = server.precise_cpu_seconds()
                turn = await send_turn(session, server.url, threads[thread])
                await asyncio.sleep(0.01)  # the run's last write lands before the sample
                if not turn.succeeded:
                    raise RuntimeError(f"flatness turn failed on {server.name}: {turn.failure}")
                if window is not None:
                    cpu_ms = (server.precise_cpu_seconds() - before) * 1000
                    size = threads[thread].last_body_size
                    measured[window].append((cpu_ms, (turn.ttft or 0) * 1000, size))
        return measured

    measured = asyncio.run(run())
    figures: dict[str, Any] = {"turns": turns}
    for window, rows in measured.items():
        figures[f"{window}_cpu_ms"] = statistics.mean(r[0] for r in rows)
        figures[f"{window}_ttft_ms"] = statistics.median(r[1] for r in rows)
        figures[f"{window}_body_bytes"] = statistics.median(r[2] for r in rows)
    return figures


def _median_figures(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for key in rounds[0]:
        values = [r[key] for r in rounds if isinstance(r.get(key), int | float)]
        if key in {"failures"}:
            merged[key] = sum(r[key] for r in rounds)
        elif values and len(values) == len(rounds):
            merged[key] = statistics.median(values)
        else:
            merged[key] = rounds[-1][key]
    merged["rounds"] = len(rounds)
    return merged


def alternate(
    sides: dict[str, Server | None], rounds: int, measure: Callable[[Server], dict[str, Any]]
) -> dict[str, dict[str, Any] | None]:
    """``measure`` each side in turn (TS first), ``rounds`` times; the median per side."""
    collected: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, server in sides.items():
            if server is not None:
                collected[name].append(measure(server))
    return {name: (_median_figures(r) if r else None) for name, r in collected.items()}


# --- the run ---------------------------------------------------------------------------------


def bench_environment(database_url: str, fake_port: int) -> dict[str, str]:
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
            "COPILOT_RUNTIME_EXECUTOR": "inline",
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "copilot_runtime.site.settings",
            "COPILOTKIT_TELEMETRY_DISABLED": "true",
        }
    )
    return env


def _start_peer(kind: str, *, fake_url: str, env: dict[str, str], log_dir: Path) -> Server:
    peers.ensure_installed(kind)
    port = free_port()
    command = peers.peer_command(kind, port=port, upstream_base_url=fake_url)
    # The runtimes log through pino, whose levels are lower-case ("warn", not "WARNING").
    peer_env = {**env, "LOG_LEVEL": "warn"}
    managed = start_process(f"ts-{kind}", command, env=peer_env, log_dir=log_dir)
    wait_healthy(managed, f"http://127.0.0.1:{port}/healthz")
    return Server(
        name=f"TS {peers.PEER_VERSIONS[kind]}", url=f"http://127.0.0.1:{port}", managed=managed
    )


def _warm(server: Server, protocol: str) -> None:
    """One whole turn before anything is measured (lazy imports, JIT, first connections)."""
    result = asyncio.run(
        conversation_load(
            base_url=server.url,
            protocol=protocol,
            users=2,
            tokens=20,
            turns_per_thread=3,
            seconds=1.5,
        )
    )
    if not result.ok:
        sample = [turn.failure for turn in result.failures[:2]]
        raise RuntimeError(f"{server.name} does not answer {protocol} turns: {sample}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    rows = set(args.rows.split(","))
    results: dict[str, Any] = {"rows": {}, "args": vars(args), "started": time.time()}
    # Timed before anything is started, and again once everything has stopped.
    results["machine"] = {"start": machine_speed()}
    print(f"[bench] machine at the start: {describe(results['machine']['start'])}", flush=True)
    log_dir = new_log_dir()
    with contextlib.ExitStack() as stack:
        database_url = os.environ.get("DATABASE_URL")
        postgres_pid: int | None = None  # an outside DATABASE_URL's server is not counted
        if not database_url:
            pg_bin = find_pg_bin()
            if pg_bin is None:
                raise SystemExit("PostgreSQL binaries not found (set DATABASE_URL)")
            postgres = stack.enter_context(ThrowawayPostgres(pg_bin))
            database_url = postgres.start()
            postgres_pid = postgres.postmaster_pid()
        fake, fake_port = start_fake_upstream(env=dict(os.environ), log_dir=log_dir)
        stack.callback(fake.stop)
        BYSTANDERS.fake_pid, BYSTANDERS.postgres_pid = fake.pid, postgres_pid
        fake_url = f"http://127.0.0.1:{fake_port}/v1"
        env = bench_environment(database_url, fake_port)
        run_migrate(env=env, log_dir=log_dir)
        port = free_port()
        ours_managed = start_server(port=port, env=env, log_dir=log_dir, server=args.server)
        stack.callback(ours_managed.stop)
        ours = Server(name="project", url=f"http://127.0.0.1:{port}", managed=ours_managed)
        ts_servers: dict[str, Server | None] = {}
        for protocol, kind in ((V1, peers.V1), (V2, peers.V2)):
            try:
                ts_servers[protocol] = _start_peer(
                    kind, fake_url=fake_url, env=env, log_dir=log_dir
                )
                stack.callback(ts_servers[protocol].managed.stop)  # type: ignore[union-attr]
            except (peers.PeersUnavailable, RuntimeError) as exc:
                print(f"[bench] TS {kind} unavailable, measuring the project alone: {exc}")
                ts_servers[protocol] = None
        for protocol in (V1, V2):
            _warm(ours, protocol)
            if ts_servers[protocol] is not None:
                _warm(ts_servers[protocol], protocol)  # type: ignore[arg-type]

        def sides(protocol: str) -> dict[str, Server | None]:
            return {TS: ts_servers[protocol], OURS: ours}

        load = {"seconds": args.duration, "warmup": args.warmup}

        def conversation(protocol: str) -> Callable[[Server], dict[str, Any]]:
            return lambda s: measure_load(
                s, protocol=protocol, users=args.users, tokens=50, turns_per_thread=40, **load
            )

        if "conv" in rows:
            for protocol in (V1, V2):
                print(f"[bench] conversation load {protocol} C={args.users}", flush=True)
                results["rows"][f"conv_{protocol}"] = alternate(
                    sides(protocol), args.rounds, conversation(protocol)
                )
        if "host" in rows:
            started, results["host"] = start_hosts(env=env, log_dir=log_dir, stack=stack)
            hosts = {side: Server(side, url, managed) for side, (url, managed) in started.items()}
            for protocol in (V1, V2):
                for host in hosts.values():
                    _warm(host, protocol)
                print(f"[bench] host project, conversation load {protocol}", flush=True)
                results["rows"][f"host_{protocol}"] = alternate(
                    {**sides(protocol), **hosts}, args.rounds, conversation(protocol)
                )
            for host in hosts.values():  # idle, but their memory is the later rows' too
                host.managed.stop()
        if "single" in rows:
            for protocol in (V1, V2):
                print(f"[bench] one user, 200 tokens, {protocol}", flush=True)
                results["rows"][f"single_{protocol}"] = alternate(
                    sides(protocol),
                    args.rounds,
                    lambda s, p=protocol: measure_load(
                        s, protocol=p, users=1, tokens=200, turns_per_thread=40, **load
                    ),
                )
        if "flat" in rows:
            for protocol in (V1, V2):
                print(f"[bench] flatness {protocol}, {args.flat_turns} turns", flush=True)
                results["rows"][f"flat_{protocol}"] = alternate(
                    sides(protocol),
                    1,
                    lambda s, p=protocol: measure_flatness(s, protocol=p, turns=args.flat_turns),
                )
        if "paced" in rows:
            for users in (args.paced_users, args.big_users):
                if users <= 0:
                    continue
                print(f"[bench] {users} paced streams (v2, 100 tokens 20 ms apart)", flush=True)
                results["rows"][f"paced_{users}"] = alternate(
                    sides(V2),
                    1,
                    lambda s, u=users: measure_load(
                        s,
                        protocol=V2,
                        users=u,
                        tokens=100,
                        delay_ms=20,
                        turns_per_thread=2,
                        seconds=args.paced_seconds,
                        warmup=0.0,
                    ),
                )
        if "adapters" in rows:
            results["rows"]["adapters"] = _adapters_row(
                args, env=env, log_dir=log_dir, stack=stack, openai=ours, fake_port=fake_port
            )
        if "celery" in rows:
            results["rows"]["celery"] = _celery_row(
                args, env=env, log_dir=log_dir, stack=stack, inline=ours, ts_v1=ts_servers[V1]
            )
    results["finished"] = time.time()
    results["machine"]["end"] = machine_speed()
    results["log_dir"] = str(log_dir)
    return results


def _adapters_row(
    args: argparse.Namespace,
    *,
    env: dict[str, str],
    log_dir: Path,
    stack: contextlib.ExitStack,
    openai: Server,
    fake_port: int,
) -> dict[str, Any]:
    """The Anthropic adapter's path against the OpenAI-compatible one, on the same fake and
    load (v2 conversation): both read the provider's stream raw, so their costs should match."""
    adapter = {
        "kind": "anthropic",
        "api_key": "bench",
        "base_url": f"http://127.0.0.1:{fake_port}",
        "model": "claude-bench",
        "max_retries": 0,
    }
    port = free_port()
    managed = start_server(
        port=port,
        env={**env, "COPILOT_RUNTIME_ADAPTER": json.dumps(adapter)},
        log_dir=log_dir,
        server=args.server,
        name="anthropic-web",
    )
    stack.callback(managed.stop)
    anthropic = Server(name="project (anthropic)", url=f"http://127.0.0.1:{port}", managed=managed)
    _warm(anthropic, V2)
    print(f"[bench] adapters: v2 conversation C={args.users}, openai | anthropic", flush=True)
    return alternate(
        {"openai": openai, "anthropic": anthropic},
        args.rounds,
        lambda s: measure_load(
            s,
            protocol=V2,
            users=args.users,
            tokens=50,
            turns_per_thread=40,
            seconds=args.duration,
            warmup=args.warmup,
        ),
    )


def _celery_row(
    args: argparse.Namespace,
    *,
    env: dict[str, str],
    log_dir: Path,
    stack: contextlib.ExitStack,
    inline: Server,
    ts_v1: Server | None,
) -> dict[str, Any]:
    if find_redis_server() is None:
        return {"skipped": "redis-server not found"}
    redis_port = free_port()
    redis = start_redis(port=redis_port, log_dir=log_dir)
    stack.callback(redis.stop)
    celery_env = {
        **env,
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "COPILOT_RUNTIME_EXECUTOR": "celery",
    }
    # The standalone site's worker defaults (settings.py): one process, the threads pool.
    worker = start_celery_worker(
        env=celery_env, log_dir=log_dir, concurrency=WORKER_CONCURRENCY, pool="threads"
    )
    stack.callback(stop_worker, worker)
    port = free_port()
    web = start_server(
        port=port, env=celery_env, log_dir=log_dir, server=args.server, name="celery-web"
    )
    stack.callback(web.stop)
    shape = Server(
        name="project (celery)",
        url=f"http://127.0.0.1:{port}",
        managed=web,
        tree=True,
        extra=[worker],
    )
    _warm(shape, V1)
    print("[bench] celery shape: TTFT at C=1, req/s at C=users", flush=True)
    single = {"seconds": args.duration, "warmup": args.warmup, "tokens": 50, "turns_per_thread": 40}
    hop = alternate(
        {"inline": inline, "celery": shape},
        args.rounds,
        lambda s: measure_load(s, protocol=V1, users=1, **single),
    )
    loaded = alternate(
        {TS: ts_v1, "celery": shape},
        args.rounds,
        lambda s: measure_load(s, protocol=V1, users=args.users, **single),
    )
    # Real models pace their tokens: a run then mostly waits, and what counts is how many
    # runs the worker keeps streaming at once.
    paced = alternate(
        {TS: ts_v1, "celery": shape},
        args.rounds,
        lambda s: measure_load(s, protocol=V1, users=args.users, delay_ms=20, **single),
    )
    return {"hop": hop, "loaded": loaded, "paced": paced}


# --- the table -------------------------------------------------------------------------------


def table_rows(results: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    found = results["rows"]

    def pair(key: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        entry = found.get(key) or {}
        return entry.get(TS), entry.get(OURS)

    def add(
        label: str, metric: str, ts: dict | None, ours: dict | None, key: str, better: str
    ) -> None:
        rows.append(
            Row(
                label=label,
                metric=metric,
                ts=None if ts is None else ts.get(key),
                ours=None if ours is None else ours.get(key),
                higher_is_better=better == "higher",
            )
        )

    for protocol, name in ((V1, "v1"), (V2, "v2")):
        ts, ours = pair(f"conv_{protocol}")
        if ours is not None:
            label = f"{name} conversation C={results['args']['users']}"
            add(label, "req/s", ts, ours, "req_s", "higher")
            add(label, "TTFT p50 ms", ts, ours, "ttft_p50_ms", "lower")
            add(label, "TTFT p95 ms", ts, ours, "ttft_p95_ms", "lower")
            add(label, "server CPU ms/req", ts, ours, "cpu_ms_per_req", "lower")
            add(label, "peak RSS MiB", ts, ours, "peak_rss_mib", "lower")
            add(label, "failed requests", ts, ours, "failures", "lower")
            for metric, key in (
                ("load generator CPU ms/req", "loadgen_cpu_ms_per_req"),
                ("fake upstream CPU ms/req", "fake_cpu_ms_per_req"),
                ("PostgreSQL CPU ms/req", "postgres_cpu_ms_per_req"),
                ("machine busy %", "machine_busy_pct"),
            ):
                rows.append(
                    Row(
                        label=label,
                        metric=metric,
                        ts=None if ts is None else ts.get(key),
                        ours=ours.get(key),
                        higher_is_better=False,
                        compared=False,
                    )
                )
    rows.extend(host_table_rows(results))
    for protocol, name in ((V1, "v1"), (V2, "v2")):
        ts, ours = pair(f"single_{protocol}")
        if ours is not None:
            add(f"{name} C=1, 200 tokens", "req/s", ts, ours, "req_s", "higher")
            add(f"{name} C=1, 200 tokens", "TTFT p50 ms", ts, ours, "ttft_p50_ms", "lower")
    for protocol, name in ((V1, "v1"), (V2, "v2")):
        ts, ours = pair(f"flat_{protocol}")
        if ours is not None:
            label = f"{name} one thread"
            turns = ours["turns"]
            add(label, "CPU ms, turns 2-11", ts, ours, "early_cpu_ms", "lower")
            add(label, f"CPU ms, turns {turns - 9}-{turns}", ts, ours, "late_cpu_ms", "lower")
            add(label, "TTFT ms, turns 2-11", ts, ours, "early_ttft_ms", "lower")
            add(label, f"TTFT ms, turns {turns - 9}-{turns}", ts, ours, "late_ttft_ms", "lower")
            if "early_sized_cpu_ms" in ours:
                sized = f"{label}, bodies padded to turn {turns}'s"
                add(sized, "CPU ms, turns 2-11", ts, ours, "early_sized_cpu_ms", "lower")
                add(sized, "TTFT ms, turns 2-11", ts, ours, "early_sized_ttft_ms", "lower")
    for key in sorted(k for k in found if k.startswith("paced_")):
        ts, ours = pair(key)
        label = f"v2 {key.removeprefix('paced_')} paced streams"
        add(label, "failed requests", ts, ours, "failures", "lower")
        add(label, "TTFT p95 ms", ts, ours, "ttft_p95_ms", "lower")
        add(label, "server CPU ms/req", ts, ours, "cpu_ms_per_req", "lower")
        add(label, "peak RSS MiB", ts, ours, "peak_rss_mib", "lower")
    adapters = found.get("adapters") or {}
    if adapters.get("anthropic") is not None:
        label = f"v2 conversation C={results['args']['users']} (openai | anthropic adapter)"
        for metric, key, better in (
            ("req/s", "req_s", True),
            ("server CPU ms/req", "cpu_ms_per_req", False),
        ):
            rows.append(
                Row(
                    label=label,
                    metric=metric,
                    ts=(adapters.get("openai") or {}).get(key),
                    ours=adapters["anthropic"].get(key),
                    higher_is_better=better,
                    columns=("openai", "anthropic"),
                )
            )
    celery = found.get("celery") or {}
    if "hop" in celery:
        inline, shape = celery["hop"].get("inline"), celery["hop"].get("celery")
        rows.append(
            Row(
                label="celery worker hop, C=1 (inline | celery)",
                metric="TTFT p50 ms",
                ts=None if inline is None else inline.get("ttft_p50_ms"),
                ours=None if shape is None else shape.get("ttft_p50_ms"),
                higher_is_better=False,
                columns=("inline", "celery"),
            )
        )
        ts, shape = celery["loaded"].get(TS), celery["loaded"].get("celery")
        label = f"v1 celery shape C={results['args']['users']}"
        add(label, "req/s", ts, shape, "req_s", "higher")
        add(label, "web+worker CPU ms/req", ts, shape, "cpu_ms_per_req", "lower")
        if "paced" in celery:
            ts, shape = celery["paced"].get(TS), celery["paced"].get("celery")
            label = f"v1 celery shape C={results['args']['users']}, tokens 20 ms apart"
            add(label, "req/s", ts, shape, "req_s", "higher")
            add(label, "TTFT p50 ms", ts, shape, "ttft_p50_ms", "lower")
            add(label, "failed requests", ts, shape, "failures", "lower")
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="conv,host,single,flat,paced,adapters,celery")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=float, default=15.0, help="measured seconds per load")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2, help="alternations per row (median)")
    parser.add_argument("--flat-turns", type=int, default=120)
    parser.add_argument("--paced-users", type=int, default=300)
    parser.add_argument("--big-users", type=int, default=1000)
    parser.add_argument("--paced-seconds", type=float, default=5.0)
    parser.add_argument("--server", choices=["uvicorn", "daphne"], default=None)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--quick", action="store_true", help="short windows, one round (~5 min)")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.warmup, args.rounds = 5.0, 1.0, 1
        args.flat_turns, args.paced_users, args.big_users = 40, 100, 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(format_table(table_rows(results)))
    machine = results["machine"]
    print(
        f"[bench] machine: {describe(machine['start'])} at the start, "
        f"{describe(machine['end'])} at the end"
    )
    print(f"[bench] written to {args.output}")
    return 1 if project_failures(results) else 0


def project_failures(results: dict[str, Any]) -> int:
    """Failed requests on the project's side of every row (the exit status: a TypeScript
    runtime refusing some of 1,000 streams is a figure, not a failed benchmark)."""

    def sides(row: dict[str, Any]) -> list[tuple[str, Any]]:
        nested = [item for item in row.items() if item[0] in {"hop", "loaded"}]
        return [pair for _, inner in nested for pair in inner.items()] or list(row.items())

    return sum(
        figures.get("failures", 0)
        for row in results["rows"].values()
        if isinstance(row, dict)
        for side, figures in sides(row)
        if side != TS and isinstance(figures, dict)
    )


if __name__ == "__main__":
    sys.exit(main())
