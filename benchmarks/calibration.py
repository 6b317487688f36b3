"""How fast this machine runs plain Python and plain JavaScript at the moment of a run.

The benchmark's figures are ratios measured in one run, but the ratio itself moves with the
machine: on a host several times slower than usual (a busy neighbour on the same hardware),
the TypeScript runtimes and the project did not slow down alike, and the ratios moved with
it. Two fixed loops, one per interpreter, timed at the start and at the end of
a run, say which kind of machine a run was measured on, so runs can be read side by side.

Each loop is timed in a fresh process of its own interpreter (the venv's Python, the Node the
TypeScript runtimes run on); the fastest of a few attempts is kept (the others waited for a
core).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

from benchmarks import peers

# Pure interpreter work: a counted loop, no allocation beyond the ints, no I/O.
PYTHON_LOOP = (
    "import time\n"
    "t = time.perf_counter()\n"
    "s = 0\n"
    "for i in range(2_000_000):\n"
    "    s += i\n"
    "print((time.perf_counter() - t) * 1000)\n"
)
# The same for V8, long enough for its optimising tier to take over.
NODE_LOOP = (
    "const t = process.hrtime.bigint(); let s = 0;"
    " for (let i = 0; i < 100_000_000; i++) { s += i % 7; }"
    " console.log(Number(process.hrtime.bigint() - t) / 1e6);"
)
ATTEMPTS = 3
TIMEOUT_SECONDS = 60.0


def _fastest_ms(command: Sequence[str], attempts: int) -> float | None:
    timings: list[float] = []
    for _ in range(attempts):
        try:
            done = subprocess.run(
                list(command), capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=True
            )
            timings.append(float(done.stdout.strip()))
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
    return min(timings) if timings else None


def machine_speed(*, attempts: int = ATTEMPTS) -> dict[str, float | None]:
    """Milliseconds of each fixed loop (None when its interpreter cannot be run)."""
    node = peers.node_binary()
    return {
        "python_loop_ms": _fastest_ms([sys.executable, "-c", PYTHON_LOOP], attempts),
        "node_loop_ms": None if node is None else _fastest_ms([node, "-e", NODE_LOOP], attempts),
    }


def describe(speed: dict[str, float | None]) -> str:
    def shown(value: float | None) -> str:
        return "unavailable" if value is None else f"{value:.0f} ms"

    return (
        f"python loop {shown(speed.get('python_loop_ms'))}, "
        f"node loop {shown(speed.get('node_loop_ms'))}"
    )
