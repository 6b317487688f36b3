"""Per-process CPU time and memory from ``/proc`` (Linux)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


@dataclass(frozen=True)
class CpuTimes:
    """Seconds of CPU: the process itself, and its children it has already waited for."""

    own: float
    reaped_children: float

    @property
    def total(self) -> float:
        return self.own + self.reaped_children


def _stat_fields(pid: int) -> list[str]:
    raw = (PROC / str(pid) / "stat").read_text()
    # The command name (field 2) is in parentheses and may contain spaces: split after it.
    return raw[raw.rindex(")") + 2 :].split()


def cpu_times(pid: int) -> CpuTimes:
    """utime+stime (fields 14, 15) and cutime+cstime (16, 17) of ``/proc/<pid>/stat``."""
    fields = _stat_fields(pid)  # fields[0] is field 3 (state)
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return CpuTimes(
        own=(utime + stime) / CLOCK_TICKS_PER_SECOND,
        reaped_children=(cutime + cstime) / CLOCK_TICKS_PER_SECOND,
    )


def threads_cpu_seconds(pid: int) -> float:
    """CPU of a process's live threads to the nanosecond (the first field of each
    ``/proc/<pid>/task/<tid>/schedstat``): ``stat``'s 10 ms ticks are too coarse for one turn
    of a few milliseconds. A thread that exits takes its time with it, so this is for deltas
    over a short window of a process whose threads persist (an event loop and its pool)."""
    total_ns = 0
    for task in (PROC / str(pid) / "task").iterdir():
        try:
            total_ns += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
    return total_ns / 1e9


def parent_pid(pid: int) -> int:
    return int(_stat_fields(pid)[1])


def children_of(pid: int) -> list[int]:
    children = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if parent_pid(int(entry.name)) == pid:
                children.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
    return children


def tree_cpu_seconds(pid: int) -> float:
    """CPU of a process and its direct children, live or exited (e.g. a postmaster and its
    short-lived backends: an exited backend's time moves into the postmaster's cutime)."""
    total = cpu_times(pid).total
    for child in children_of(pid):
        try:
            total += cpu_times(child).total
        except (OSError, ValueError, IndexError):
            continue
    return total


def memory_kib(pid: int) -> dict[str, int]:
    """``VmHWM`` (peak resident set) and ``VmRSS`` (now) of ``/proc/<pid>/status``, in KiB."""
    values: dict[str, int] = {}
    for line in (PROC / str(pid) / "status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in {"VmHWM", "VmRSS"}:
            values[name] = int(rest.split()[0])
    return values


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot (``/proc/stat``, first line)."""
    fields = (PROC / "stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(value) for value in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    # guest time is already counted in user/nice
    busy = sum(ticks[:8]) - idle
    return busy / CLOCK_TICKS_PER_SECOND


def own_cpu_seconds() -> float:
    """This process (the load generator and the runner)."""
    times = os.times()
    return times.user + times.system
