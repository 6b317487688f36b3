"""The benchmark's Celery shape: choosing executors, the side-by-side comparison and the worker
hop, token counting over coalesced deltas, the sampler's accounting, and the real redis-server
and Celery worker it starts and stops."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import celery_processes, comparison
from benchmarks.celery_processes import (
    _redis_answers,
    find_redis_server,
    start_celery_worker,
    start_redis,
    stop_worker,
    tree_memory,
    worker_command,
)
from benchmarks.postgres import free_port
from benchmarks.processes import Managed, ProcessFailed, start_process
from benchmarks.response_reader import StreamReader
from benchmarks.run_benchmark import WindowSampler, render_table
from benchmarks.shapes import CELERY, INLINE, executor_environment, parse_executors

# --- choosing the executors -------------------------------------------------------------------


def test_executors_are_parsed_in_order_without_duplicates() -> None:
    assert parse_executors("inline,celery") == [INLINE, CELERY]
    assert parse_executors(" Celery , inline,celery ") == [CELERY, INLINE]


@pytest.mark.parametrize("raw", ["", " , ", "inline,threads"])
def test_unknown_or_no_executors_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="unknown executor"):
        parse_executors(raw)


def test_the_inline_shape_is_chosen_explicitly_and_has_no_redis() -> None:
    base = {"DATABASE_URL": "postgres://x", "COPILOT_RUNTIME_EXECUTOR": "celery"}

    env = executor_environment(base, executor=INLINE)

    assert env["COPILOT_RUNTIME_EXECUTOR"] == "inline"
    assert "REDIS_URL" not in env
    assert base["COPILOT_RUNTIME_EXECUTOR"] == "celery", "the base environment is not modified"


def test_the_celery_shape_gets_redis_and_the_celery_executor() -> None:
    env = executor_environment(
        {"DATABASE_URL": "postgres://x"}, executor=CELERY, redis_url="redis://127.0.0.1:1/0"
    )

    assert env["COPILOT_RUNTIME_EXECUTOR"] == "celery"
    assert env["REDIS_URL"] == "redis://127.0.0.1:1/0"
    assert env["DATABASE_URL"] == "postgres://x"
    with pytest.raises(ValueError, match="Redis"):
        executor_environment({}, executor=CELERY)


def test_the_worker_command_is_one_quiet_worker() -> None:
    command = worker_command(concurrency=3, pool="prefork", hostname="bench@host")

    assert command[1:4] == ["-A", "copilot_runtime.site", "worker"]
    assert command[command.index("-l") + 1] == "warning"
    assert command[command.index("-c") + 1] == "3"
    assert command[command.index("-P") + 1] == "prefork"
    assert {"--without-mingle", "--without-gossip"} <= set(command)


# --- side by side -----------------------------------------------------------------------------


def result(executor: str, name: str, *, ttft_p50: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "executor": executor,
        "requests_per_second": 10.0,
        "ttft": {"p50_ms": ttft_p50, "p95_ms": ttft_p50 * 2},
        "latency": {"p50_ms": ttft_p50 + 5, "p95_ms": ttft_p50 * 3},
        "server_cpu_ms_per_request": 10.0,
        "server_cpu_percent_of_core": 10.0,
        "server_peak_rss_mib": 100.0,
        "postgres_cpu_ms_per_request": 3.0,
        "postgres_per_request": {"sessions": 0.0, "transactions": 4.0},
        "failed": 0,
        "foreign_cpu_percent_of_core": 50.0,
        **extra,
    }


def test_the_worker_hop_is_celery_minus_inline_at_one_client() -> None:
    results = [
        result(INLINE, "1x200", ttft_p50=18.0),
        result(INLINE, "50x50", ttft_p50=600.0),
        result(CELERY, "1x200", ttft_p50=21.5),
        result(CELERY, "50x50", ttft_p50=900.0),
    ]

    hop = comparison.worker_hop(results)

    assert hop is not None
    assert hop["ttft_p50_added_ms"] == pytest.approx(3.5)
    assert hop["ttft_p95_added_ms"] == pytest.approx(7.0)
    assert hop["latency_p50_added_ms"] == pytest.approx(3.5)
    assert hop["within_aim"] is True


def test_a_hop_above_the_aim_is_flagged() -> None:
    results = [result(INLINE, "1x200", ttft_p50=18.0), result(CELERY, "1x200", ttft_p50=80.0)]

    hop = comparison.worker_hop(results)

    assert hop is not None
    assert hop["ttft_p50_added_ms"] == pytest.approx(62.0)
    assert hop["within_aim"] is False
    assert "ABOVE the 5 ms aim" in comparison.render(comparison.side_by_side(results))


def test_no_hop_without_both_executors_at_one_client() -> None:
    assert comparison.worker_hop([result(INLINE, "1x200", ttft_p50=18.0)]) is None
    assert comparison.side_by_side([result(CELERY, "50x50", ttft_p50=1.0)]) == {
        "configurations": {},
        "worker_hop": None,
    }


def test_side_by_side_pairs_each_figure_and_counts_the_worker_in_the_runtime_cost() -> None:
    inline = result(INLINE, "50x50", ttft_p50=600.0)
    celery = result(
        CELERY,
        "50x50",
        ttft_p50=900.0,
        worker_cpu_ms_per_request=40.0,
        runtime_cpu_ms_per_request=50.0,
        worker_peak_rss_mib=300.0,
    )

    figures = comparison.side_by_side([inline, celery])["configurations"]["50x50"]

    assert figures["TTFT p50"] == {"inline": 600.0, "celery": 900.0, "celery_minus_inline": 300.0}
    # Inline, the runtime is daphne alone; with Celery, daphne plus the worker.
    assert figures["daphne+worker CPU"] == {
        "inline": 10.0,
        "celery": 50.0,
        "celery_minus_inline": 40.0,
    }
    assert figures["worker CPU"]["inline"] is None
    assert figures["worker CPU"]["celery_minus_inline"] is None
    text = comparison.render(comparison.side_by_side([inline, celery]))
    assert "worker peak RSS (MiB)" in text
    assert "300.0" in text


def test_the_main_table_names_the_executor_and_the_worker_figures() -> None:
    table = render_table(
        [
            result(INLINE, "1x200", ttft_p50=18.0),
            result(
                CELERY,
                "1x200",
                ttft_p50=80.0,
                worker_cpu_ms_per_request=52.25,
                worker_peak_rss_mib=481.5,
            ),
        ]
    )

    inline_row, celery_row = (line for line in table.splitlines() if "1x200" in line)
    assert " inline " in inline_row
    assert " celery " in celery_row
    assert "52.25" in celery_row
    assert "481.5" in celery_row


# --- tokens relayed as coalesced deltas -------------------------------------------------------


def part(payload: bytes) -> bytes:
    return b"\r\n---\r\nContent-Type: application/json\r\n\r\n" + payload


def test_tokens_are_counted_in_the_text_not_in_the_items() -> None:
    # A run relayed from a worker: the event log's coalesced deltas, several tokens per item.
    reader = StreamReader()
    reader.feed(
        part(
            b'{"incremental":[{"items":["t0 t1 t2"],"path":["generateCopilotResponse",'
            b'"messages",0,"content",0]}],"hasNext":true}'
        )
        + part(
            b'{"incremental":[{"items":[" t3"," t4 t5"],"path":["generateCopilotResponse",'
            b'"messages",0,"content",1]}],"hasNext":false}'
        )
        + b"\r\n-----\r\n",
        1.0,
    )

    assert reader.observation.tokens == 6
    assert reader.observation.content_items == 3
    assert reader.observation.first_token_at == 1.0


def test_a_token_split_across_items_is_one_token() -> None:
    reader = StreamReader()
    reader.feed(
        part(
            b'{"incremental":[{"items":["t1","0"," t11"],"path":["generateCopilotResponse",'
            b'"messages",0,"content",0]}],"hasNext":false}'
        )
        + b"\r\n-----\r\n",
        0.0,
    )

    assert reader.observation.tokens == 2
    assert reader.observation.content_items == 3


# --- the sampler's accounting -----------------------------------------------------------------


def test_the_worker_and_redis_are_not_counted_as_other_jobs() -> None:
    sampler = WindowSampler(
        server_pid=1, postgres_pid=2, fake_pid=3, database_url="", worker_pid=4, redis_pid=5
    )
    sampler.deltas = {
        "machine_busy": 10.0,
        "server": 1.0,
        "fake_upstream": 0.5,
        "load_generator": 0.5,
        "postgres": 1.0,
        "worker": 4.0,
        "redis": 0.5,
    }

    assert sampler.foreign_cpu_seconds() == pytest.approx(2.5)


# --- the real processes -----------------------------------------------------------------------


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def redis_server(log_dir: Path) -> Iterator[tuple[Managed, int]]:
    if find_redis_server() is None:
        pytest.fail("redis-server is not installed (scripts/test.sh installs it)")
    port = free_port()
    managed = start_redis(port=port, log_dir=log_dir)
    try:
        yield managed, port
    finally:
        managed.stop()


def test_redis_is_started_on_loopback_and_stopped(redis_server: tuple[Managed, int]) -> None:
    managed, port = redis_server

    assert _redis_answers(port)
    managed.stop()
    assert managed.process.poll() is not None
    assert not _redis_answers(port)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_one_worker_is_ready_through_the_broker_and_stopped_with_its_pool(
    redis_server: tuple[Managed, int], log_dir: Path
) -> None:
    _, port = redis_server
    env = {
        **os.environ,
        "REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "COPILOT_RUNTIME_EXECUTOR": "celery",
        "DJANGO_SETTINGS_MODULE": "copilot_runtime.site.settings",
    }
    env.pop("CELERY_BROKER_URL", None)

    worker = start_celery_worker(env=env, log_dir=log_dir, concurrency=2)
    try:
        # Ready means the consumer runs: its two pool children exist by then.
        assert worker.process.poll() is None
        memory = tree_memory(worker.pid)
        assert len(memory.peak_rss_kib_by_process) == 3
        assert memory.peak_rss_kib_sum >= memory.rss_kib > 0
        # -l warning: the per-task and "ready." INFO lines are not written.
        assert " ready." not in worker.stderr_path.read_text(errors="replace")
    finally:
        stop_worker(worker)

    assert worker.process.poll() is not None
    deadline = time.monotonic() + 10
    while _group_alive(worker.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(worker.pid), "a pool child outlived the worker"


def test_a_worker_that_cannot_start_is_reported_with_its_output(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_such_app(**options: Any) -> list[str]:
        command = worker_command(**options)
        command[command.index("copilot_runtime.site")] = "no_such_celery_app_module"
        return command

    monkeypatch.setattr(celery_processes, "worker_command", no_such_app)

    with pytest.raises(ProcessFailed, match="the celery worker exited at start") as raised:
        start_celery_worker(
            env={**os.environ, "REDIS_URL": "redis://127.0.0.1:1/0"},
            log_dir=log_dir,
            concurrency=1,
        )
    assert "no_such_celery_app_module" in str(raised.value)


def test_tree_memory_sums_a_process_and_its_children(log_dir: Path) -> None:
    parent = start_process(
        "tree",
        [
            "sh",
            "-c",
            "sleep 30 & sleep 30 & wait",
        ],
        env=dict(os.environ),
        log_dir=log_dir,
    )
    try:
        deadline = time.monotonic() + 5
        memory = tree_memory(parent.pid)
        while len(memory.peak_rss_kib_by_process) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            memory = tree_memory(parent.pid)
        assert len(memory.peak_rss_kib_by_process) == 3
        assert all(kib > 0 for kib in memory.peak_rss_kib_by_process.values())
        assert memory.pss_kib is None or memory.pss_kib <= memory.rss_kib
    finally:
        parent.stop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
