"""Two checkouts' celery shapes, measured alternately on one machine: did a change pay?

``make bench`` compares the project with the TypeScript runtimes; a change to the project is
judged by this probe first, against the code before it. Each checkout (``--trees``, the first
is the baseline) gets its own web process (uvicorn, as ``scripts/run.sh`` serves) and its own
threads-pool Celery worker (the standalone site's 50 run slots), serving that checkout's code
from the same virtualenv; they share one throwaway PostgreSQL (migrated by the first checkout:
the checkouts must agree on the schema), one fake upstream and one redis-server (a database
number each, so no worker takes another's tasks). Then the same load as ``make bench``'s
celery row (v1, ``--users`` conversations of 40 turns, 50-token replies) goes to each in turn,
``--rounds`` times, and each window's figures are printed: req/s, TTFT p50, and the CPU per
request of the web process, the worker, PostgreSQL, Redis, the fake upstream and the load
generator (this process), with how busy both cores were. The end: each checkout's medians and,
round by round, its req/s against the baseline's.

    .venv/bin/python -m benchmarks.paired --trees /tmp/before,. [--rounds 6] [--seconds 10]
        [--profile-dir /tmp/prof [--gil]]

Read the pairwise ratios, not one window: on a shared 2-core machine two windows of the same
code differ by 5-10 %. ``--profile-dir`` records py-spy (``.venv/bin/pip install py-spy``)
raw stacks of each checkout's web and worker over its last window.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.celery_processes import start_celery_worker, start_redis, stop_worker
from benchmarks.conversation import V1, conversation_load
from benchmarks.postgres import ThrowawayPostgres, find_pg_bin, free_port
from benchmarks.processes import (
    VENV_BIN,
    Managed,
    new_log_dir,
    run_migrate,
    start_fake_upstream,
    start_server,
)
from benchmarks.procstat import (
    cpu_times,
    machine_busy_seconds,
    own_cpu_seconds,
    tree_cpu_seconds,
)
from benchmarks.side_by_side import WORKER_CONCURRENCY, bench_environment

# The CPU columns, in the order printed: each window's spend divided by its requests.
PROCESSES = ("web", "worker", "postgres", "redis", "fake", "loadgen")
PY_SPY = VENV_BIN / "py-spy"


@dataclass(frozen=True)
class Stack:
    """One checkout's celery shape."""

    label: str
    web: Managed
    worker: Managed
    url: str


@dataclass(frozen=True)
class Bystanders:
    """The processes every stack shares (pids)."""

    postgres: int
    redis: int
    fake: int


def cpu_marks(stack: Stack, shared: Bystanders) -> dict[str, float]:
    """CPU seconds so far of each process a window counts, the machine's and the clock."""
    return {
        "web": cpu_times(stack.web.pid).total,
        "worker": tree_cpu_seconds(stack.worker.pid),
        "postgres": tree_cpu_seconds(shared.postgres),
        "redis": tree_cpu_seconds(shared.redis),
        "fake": tree_cpu_seconds(shared.fake),
        "loadgen": own_cpu_seconds(),
        "busy": machine_busy_seconds(),
        "clock": time.monotonic(),
    }


def window_figures(
    opened: Mapping[str, float],
    closed: Mapping[str, float],
    *,
    requests: int,
    failures: int,
    ttft_p50_ms: float,
    cores: int,
) -> dict[str, float]:
    """One window's figures from the marks at its ends (``cpu_marks``)."""
    spent = {name: closed[name] - opened[name] for name in opened}
    seconds = spent["clock"]
    figures = {
        "req_s": requests / seconds,
        "failures": float(failures),
        "ttft_p50_ms": ttft_p50_ms,
        "busy_pct": 100 * spent["busy"] / (seconds * cores),
    }
    for name in PROCESSES:
        figures[f"{name}_ms"] = spent[name] * 1000 / requests if requests else float("nan")
    return figures


def medians(windows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    return {key: statistics.median(window[key] for window in windows) for key in windows[0]}


def pairwise_ratios(
    baseline: Sequence[Mapping[str, float]], other: Sequence[Mapping[str, float]]
) -> list[float]:
    """``other``'s req/s over the baseline's, window by window (measured back to back)."""
    return [b["req_s"] / a["req_s"] for a, b in zip(baseline, other, strict=True)]


def format_figures(label: str, figures: Mapping[str, float]) -> str:
    cpu = " ".join(f"{name}={figures[f'{name}_ms']:.2f}" for name in PROCESSES)
    return (
        f"{label:>12}  {figures['req_s']:7.1f} req/s  ttft p50 {figures['ttft_p50_ms']:6.1f} ms"
        f"  failures {figures['failures']:.0f}  busy {figures['busy_pct']:4.1f} %"
        f"  cpu ms/req: {cpu}"
    )


def labels_for(trees: Sequence[Path]) -> list[str]:
    """Each checkout's directory name, numbered where two share one."""
    names = [tree.name or str(tree) for tree in trees]
    return [
        name if names.count(name) == 1 else f"{name}#{index}" for index, name in enumerate(names)
    ]


def _spy(pid: int, *, output: Path, seconds: float, gil: bool) -> subprocess.Popen[bytes]:
    command = [str(PY_SPY), "record", "-p", str(pid), "-r", "200", "-d", str(max(1, int(seconds)))]
    command += ["-f", "raw", "-o", str(output), "--threads", "--nonblocking"]
    command += ["--gil"] if gil else []
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(
    stack: Stack, shared: Bystanders, args: argparse.Namespace, *, profile: bool
) -> dict[str, float]:
    marks: dict[bool, dict[str, float]] = {}
    spies: list[subprocess.Popen[bytes]] = []

    def on_window(opening: bool) -> None:
        marks[opening] = cpu_marks(stack, shared)
        if opening and profile:
            for name, managed in (("web", stack.web), ("worker", stack.worker)):
                output = args.profile_dir / f"{stack.label}-{name}.raw"
                spies.append(_spy(managed.pid, output=output, seconds=args.seconds, gil=args.gil))

    result = asyncio.run(
        conversation_load(
            base_url=stack.url,
            protocol=V1,
            users=args.users,
            tokens=50,
            turns_per_thread=40,
            seconds=args.seconds,
            warmup=args.warmup,
            on_window=on_window,
        )
    )
    for spy in spies:
        spy.wait()
    ttfts = sorted(turn.ttft * 1000 for turn in result.ok if turn.ttft is not None)
    return window_figures(
        marks[True],
        marks[False],
        requests=len(result.ok),
        failures=len(result.failures),
        ttft_p50_ms=ttfts[len(ttfts) // 2] if ttfts else float("nan"),
        cores=os.cpu_count() or 1,
    )


def run(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    log_dir = new_log_dir()
    print(f"[paired] logs in {log_dir}", flush=True)
    pg_bin = find_pg_bin()
    if pg_bin is None:
        raise SystemExit("PostgreSQL binaries not found")
    with contextlib.ExitStack() as stack:
        postgres = stack.enter_context(ThrowawayPostgres(pg_bin))
        database_url = postgres.start()
        fake, fake_port = start_fake_upstream(env=dict(os.environ), log_dir=log_dir)
        stack.callback(fake.stop)
        env = bench_environment(database_url, fake_port)
        run_migrate(env=env, log_dir=log_dir)
        redis_port = free_port()
        redis = start_redis(port=redis_port, log_dir=log_dir)
        stack.callback(redis.stop)
        shared = Bystanders(postgres=postgres.postmaster_pid() or 0, redis=redis.pid, fake=fake.pid)
        stacks: list[Stack] = []
        for index, (label, tree) in enumerate(zip(labels_for(args.trees), args.trees, strict=True)):
            tree_env = {
                **env,
                "REDIS_URL": f"redis://127.0.0.1:{redis_port}/{index}",
                "COPILOT_RUNTIME_EXECUTOR": "celery",
            }
            worker = start_celery_worker(
                env=tree_env,
                log_dir=log_dir,
                concurrency=WORKER_CONCURRENCY,
                pool="threads",
                name=f"worker-{index}",
                cwd=tree,
            )
            stack.callback(stop_worker, worker)
            port = free_port()
            web = start_server(
                port=port, env=tree_env, log_dir=log_dir, name=f"web-{index}", cwd=tree
            )
            stack.callback(web.stop)
            stacks.append(Stack(label, web, worker, f"http://127.0.0.1:{port}"))
        for one in stacks:  # lazy imports, first connections
            asyncio.run(
                conversation_load(
                    base_url=one.url, protocol=V1, users=4, tokens=20, turns_per_thread=3, seconds=2
                )
            )
        windows: dict[str, list[dict[str, float]]] = {one.label: [] for one in stacks}
        for round_index in range(args.rounds):
            profile = args.profile_dir is not None and round_index == args.rounds - 1
            for one in stacks:
                figures = measure(one, shared, args, profile=profile)
                windows[one.label].append(figures)
                print(format_figures(one.label, figures), flush=True)
    return windows


def report(windows: Mapping[str, Sequence[Mapping[str, float]]]) -> str:
    labels = list(windows)
    lines = ["medians:"]
    lines += [format_figures(label, medians(windows[label])) for label in labels]
    baseline = windows[labels[0]]
    for label in labels[1:]:
        ratios = pairwise_ratios(baseline, windows[label])
        shown = " ".join(f"{ratio:.3f}" for ratio in ratios)
        lines.append(
            f"{label} / {labels[0]} req/s, window by window: {shown}"
            f" (median {statistics.median(ratios):.3f})"
        )
    return "\n".join(lines)


def _trees(value: str) -> list[Path]:
    trees = [Path(part).resolve() for part in value.split(",") if part.strip()]
    for tree in trees:
        if not (tree / "manage.py").is_file():
            raise argparse.ArgumentTypeError(f"{tree} is not a checkout of the project")
    if not trees:
        raise argparse.ArgumentTypeError("name at least one checkout")
    return trees


def parser() -> argparse.ArgumentParser:
    parsed = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parsed.add_argument("--trees", type=_trees, required=True, help="checkouts, baseline first")
    parsed.add_argument("--users", type=int, default=50)
    parsed.add_argument("--rounds", type=int, default=4)
    parsed.add_argument("--seconds", type=float, default=10.0)
    parsed.add_argument("--warmup", type=float, default=2.0)
    parsed.add_argument("--profile-dir", type=Path, default=None)
    parsed.add_argument("--gil", action="store_true", help="py-spy: the GIL's holder only")
    return parsed


def main(argv: Sequence[str] | None = None) -> Any:
    args = parser().parse_args(argv)
    if args.profile_dir is not None:
        args.profile_dir.mkdir(parents=True, exist_ok=True)
    print(report(run(args)))


if __name__ == "__main__":
    main()
