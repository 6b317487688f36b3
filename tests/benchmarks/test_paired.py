"""The paired probe (benchmarks/paired.py): a window's figures from its CPU marks, the checkouts
it is given, how two checkouts are compared, and processes started from another checkout."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import pytest

from benchmarks import paired
from benchmarks.processes import start_process


def _marks(**values: float) -> dict[str, float]:
    names = (*paired.PROCESSES, "busy", "clock")
    return {name: values.get(name, 0.0) for name in names}


def test_a_window_divides_each_process_cpu_by_its_requests() -> None:
    opened = _marks(web=10.0, worker=20.0, postgres=5.0, busy=100.0, clock=50.0)
    closed = _marks(web=10.4, worker=20.6, postgres=5.2, loadgen=0.1, busy=115.0, clock=60.0)

    figures = paired.window_figures(
        opened, closed, requests=200, failures=1, ttft_p50_ms=12.5, cores=2
    )

    assert figures["req_s"] == pytest.approx(20.0)
    assert figures["web_ms"] == pytest.approx(2.0)
    assert figures["worker_ms"] == pytest.approx(3.0)
    assert figures["postgres_ms"] == pytest.approx(1.0)
    assert figures["loadgen_ms"] == pytest.approx(0.5)
    assert figures["redis_ms"] == 0.0
    assert figures["busy_pct"] == pytest.approx(75.0)
    assert (figures["failures"], figures["ttft_p50_ms"]) == (1.0, 12.5)


def test_a_window_without_requests_has_no_cpu_per_request() -> None:
    figures = paired.window_figures(
        _marks(), _marks(web=1.0, clock=10.0), requests=0, failures=3, ttft_p50_ms=0.0, cores=2
    )

    assert figures["req_s"] == 0.0
    assert math.isnan(figures["web_ms"])


def test_checkouts_are_compared_window_by_window_against_the_first() -> None:
    baseline = [{"req_s": 100.0}, {"req_s": 200.0}]
    other = [{"req_s": 110.0}, {"req_s": 180.0}]

    assert paired.pairwise_ratios(baseline, other) == pytest.approx([1.1, 0.9])
    with pytest.raises(ValueError):
        paired.pairwise_ratios(baseline, other[:1])


def test_the_report_gives_medians_and_the_ratios_to_the_baseline() -> None:
    def window(req_s: float) -> dict[str, float]:
        return {
            "req_s": req_s,
            "failures": 0.0,
            "ttft_p50_ms": 10.0,
            "busy_pct": 80.0,
            **{f"{name}_ms": 1.0 for name in paired.PROCESSES},
        }

    text = paired.report(
        {"before": [window(100), window(300), window(200)], "after": [window(120)] * 3}
    )

    assert "  200.0 req/s" in text.splitlines()[1]
    assert "after / before req/s, window by window: 1.200 0.400 0.600 (median 0.600)" in text


def test_labels_are_the_directory_names_numbered_where_they_clash() -> None:
    trees = [Path("/a/main"), Path("/b/main"), Path("/c/base")]

    assert paired.labels_for(trees) == ["main#0", "main#1", "base"]


def test_only_checkouts_of_the_project_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "manage.py").write_text("")
    other = tmp_path / "elsewhere"
    other.mkdir()

    assert paired._trees(f"{tmp_path},") == [tmp_path.resolve()]
    with pytest.raises(argparse.ArgumentTypeError, match="not a checkout"):
        paired._trees(f"{tmp_path},{other}")
    with pytest.raises(argparse.ArgumentTypeError, match="at least one"):
        paired._trees(",")


def test_a_process_runs_from_the_checkout_it_is_given(tmp_path: Path) -> None:
    managed = start_process(
        "pwd",
        [sys.executable, "-c", "import os; print(os.getcwd())"],
        env={},
        log_dir=tmp_path,
        cwd=tmp_path,
    )
    managed.process.wait(timeout=30)
    deadline = time.monotonic() + 5
    while not managed.stdout_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)

    assert managed.stdout_path.read_text().strip() == str(tmp_path)
