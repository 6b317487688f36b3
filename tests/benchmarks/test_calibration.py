"""The machine's speed, timed beside each benchmark run."""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks import calibration
from benchmarks.calibration import describe, machine_speed


def test_each_interpreter_times_its_loop_in_milliseconds() -> None:
    speed = machine_speed(attempts=1)
    assert speed["python_loop_ms"] is not None and speed["python_loop_ms"] > 0
    if calibration.peers.node_binary() is not None:
        assert speed["node_loop_ms"] is not None and speed["node_loop_ms"] > 0


def test_the_fastest_attempt_is_kept(tmp_path: Path) -> None:
    # Each attempt prints the next of 30, 10, 20: the one that waited least is the machine's.
    counter = tmp_path / "attempt"
    counter.write_text("0")
    script = (
        f"import pathlib; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()); "
        "p.write_text(str(n + 1)); print([30, 10, 20][n])"
    )
    assert calibration._fastest_ms([sys.executable, "-c", script], attempts=3) == 10.0


def test_a_loop_that_cannot_run_or_says_no_number_is_unavailable(tmp_path: Path) -> None:
    fastest = calibration._fastest_ms
    assert fastest([str(tmp_path / "no-such-interpreter")], attempts=2) is None
    assert fastest([sys.executable, "-c", "print('fast')"], attempts=1) is None
    assert fastest([sys.executable, "-c", "raise SystemExit(3)"], attempts=1) is None


def test_the_description_names_both_loops() -> None:
    assert describe({"python_loop_ms": 91.4, "node_loop_ms": None}) == (
        "python loop 91 ms, node loop unavailable"
    )
