"""Long-lived Node driver processes for the end-to-end client helpers (``--serve`` mode).

Why: a one-shot ``node <driver>`` run spends about half of its CPU loading the CopilotKit
client libraries, and the suite makes hundreds of runs on a 2-core machine. A served driver
(``tests/e2e/js/serve.cjs`` has the protocol) loads them once per pytest worker, then answers
one JSON command per line with the same result a one-shot run prints.

A helper asks ``served_driver(key, ...)`` for this process's driver and calls it; it takes its
one-shot path instead when ``one_shot_forced()`` (``E2E_NODE_ONE_SHOT=1``) or when ``call``
returns None (the driver is busy with another thread's command). A timeout, a crash, a broken
reply or a fatal error discards the process (the next call starts a fresh one) and raises
JsClientError with what the process printed to stderr. Every driver is stopped at interpreter
exit; should the interpreter die without its atexit hooks, the driver sees its stdin close and
exits on its own.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

# Set to anything but "" or "0" to send every command through a one-shot process.
ONE_SHOT_ENV = "E2E_NODE_ONE_SHOT"

# Grace periods for a process being stopped, and for its stderr to drain after it exits.
STOP_GRACE_SECONDS = 2.0
DRAIN_SECONDS = 2.0
# What a driver printed is kept for error messages only; bound it against a chatty library.
STDERR_LINES_KEPT = 2000


class JsClientError(RuntimeError):
    """The Node driver could not run or did not answer with JSON."""


def node_executable() -> str:
    node = shutil.which("node")
    if node is None:
        raise JsClientError("`node` is not on PATH; the end-to-end client tests need Node >= 18")
    return node


def run_one_shot(script: Path, command: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One command through a Node process of its own (``node <script>``, the command on stdin,
    one JSON result on stdout), run in the script's folder; ``result["stderr"]`` is what it
    printed meanwhile. Raises JsClientError when Node fails, times out or prints no JSON."""
    try:
        completed = subprocess.run(
            [node_executable(), str(script)],
            cwd=script.parent,
            input=json.dumps(command),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        raise JsClientError(f"{script.name} timed out after {timeout}s") from expired
    if completed.returncode != 0:
        raise JsClientError(
            f"{script.name} exited with {completed.returncode}; stderr:\n{completed.stderr}"
        )
    try:
        result: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError as error:
        raise JsClientError(
            f"{script.name} printed no JSON; stdout:\n{completed.stdout}\n"
            f"stderr:\n{completed.stderr}"
        ) from error
    result["stderr"] = completed.stderr
    return result


def one_shot_forced() -> bool:
    return os.environ.get(ONE_SHOT_ENV, "") not in ("", "0")


@dataclass(frozen=True)
class ServedReply:
    """A served command's result (the one-shot result, unchanged) and what it printed."""

    result: dict[str, Any]
    stderr: str


class _Process:
    """One running ``node <driver> --serve``, with threads draining its stdout and stderr
    (a full pipe would block the driver; the stdout lines are the replies)."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.popen: subprocess.Popen[str] = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        self.replies: queue.Queue[str | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES_KEPT)
        self._stderr_lock = threading.Lock()
        assert self.popen.stdout is not None and self.popen.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_replies, args=(self.popen.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self.popen.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_replies(self, stream: IO[str]) -> None:
        for line in stream:
            self.replies.put(line)
        self.replies.put(None)  # end of output: the process has exited or closed stdout

    def _read_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            with self._stderr_lock:
                self._stderr.append(line)

    def clear_stderr(self) -> None:
        with self._stderr_lock:
            self._stderr.clear()

    def stderr_text(self) -> str:
        with self._stderr_lock:
            return "".join(self._stderr)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line)
        self.popen.stdin.flush()

    def kill(self) -> str:
        """Kill the process; return everything it printed to stderr since the last clear."""
        if self.popen.poll() is None:
            self.popen.kill()
        return self._reap()

    def stop(self) -> None:
        """Close stdin (the driver exits on it), then kill whatever is still running."""
        with contextlib.suppress(OSError):  # a broken pipe: the process is gone already
            if self.popen.stdin is not None:
                self.popen.stdin.close()
        try:
            self.popen.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.popen.kill()
        self._reap()

    def _reap(self) -> str:
        # SIGKILL takes effect unless the process is stuck in the kernel; then move on.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=STOP_GRACE_SECONDS)
        for reader in self._readers:
            reader.join(timeout=DRAIN_SECONDS)
        for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if stream is not None:
                # A broken stdin pipe fails its flush: there is nothing left to send anyway.
                with contextlib.suppress(OSError):
                    stream.close()
        return self.stderr_text()


class ServedDriver:
    """This process's served driver for one (script, version): one command at a time."""

    def __init__(self, label: str, argv: list[str], cwd: Path) -> None:
        self.label = label
        self._argv = argv
        self._cwd = cwd
        # Held for a whole command; a second thread finds it taken and goes one-shot.
        self._busy = threading.Lock()
        self._process: _Process | None = None
        self._last_id = 0

    @property
    def pid(self) -> int | None:
        """The running driver's process id (None before the first call or once discarded)."""
        process = self._process
        return process.popen.pid if process is not None and process.alive() else None

    def call(self, command: dict[str, Any], timeout: float) -> ServedReply | None:
        """The command's reply, or None when another thread's command holds the driver."""
        if not self._busy.acquire(blocking=False):
            return None
        try:
            return self._call(command, timeout)
        finally:
            self._busy.release()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.stop()

    def _discard(self) -> str:
        process, self._process = self._process, None
        return process.kill() if process is not None else ""

    def _running_process(self) -> _Process:
        if self._process is not None and not self._process.alive():
            self._discard()  # it died between commands: start afresh, nothing was lost
        if self._process is None:
            self._process = _Process(self._argv, self._cwd)
        return self._process

    def _call(self, command: dict[str, Any], timeout: float) -> ServedReply:
        deadline = time.monotonic() + timeout
        self._last_id += 1
        request_id = self._last_id
        try:
            line = self._exchange(command, request_id, deadline, timeout)
        except BaseException:
            # Whatever interrupted the exchange (a timeout, a crash, pytest-timeout, Ctrl-C), the
            # process may still owe this command's reply: it must not answer the next command.
            if self._process is not None:
                self._discard()
            raise
        return self._parse_reply(line, request_id)

    def _exchange(
        self, command: dict[str, Any], request_id: int, deadline: float, timeout: float
    ) -> str:
        """Send the command; return the reply line (raise, discarding, if none comes)."""
        process = self._running_process()
        process.clear_stderr()
        try:
            process.send(json.dumps({"id": request_id, "command": command}) + "\n")
        except OSError as error:
            raise JsClientError(
                f"{self.label} (served) stopped before taking the command; stderr:\n"
                f"{self._discard()}"
            ) from error
        try:
            line = process.replies.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty as expired:
            raise JsClientError(
                f"{self.label} timed out after {timeout}s for op {command.get('op')!r}; "
                f"stderr:\n{self._discard()}"
            ) from expired
        if line is None:
            stderr = self._discard()
            raise JsClientError(
                f"{self.label} (served) exited with {process.popen.returncode}; stderr:\n{stderr}"
            )
        return line

    def _parse_reply(self, line: str, request_id: int) -> ServedReply:
        try:
            reply = json.loads(line)
            if not isinstance(reply, dict) or reply.get("id") != request_id:
                raise ValueError(f"not the reply to command {request_id}")
        except ValueError as error:
            raise JsClientError(
                f"{self.label} (served) printed a line that is not its JSON reply ({error}):\n"
                f"{line}\nstderr:\n{self._discard()}"
            ) from error
        stderr = str(reply.get("stderr") or "")
        if not reply.get("ok"):
            if reply.get("fatal"):
                self._discard()
            raise JsClientError(f"{self.label} (served) failed: {reply.get('error')}\n{stderr}")
        result = reply.get("result")
        if not isinstance(result, dict):
            self._discard()
            raise JsClientError(f"{self.label} (served) answered a non-object result: {line}")
        return ServedReply(result=result, stderr=stderr)


_drivers: dict[tuple[str, ...], ServedDriver] = {}
_drivers_lock = threading.Lock()
_drivers_pid = os.getpid()


def served_driver(key: tuple[str, ...], label: str, argv: list[str], cwd: Path) -> ServedDriver:
    """This process's driver for ``key`` (created on first use; started on its first call)."""
    global _drivers_pid
    with _drivers_lock:
        if _drivers_pid != os.getpid():
            # A forked child: the parent's drivers are the parent's to use and stop.
            _drivers.clear()
            _drivers_pid = os.getpid()
        driver = _drivers.get(key)
        if driver is None:
            driver = _drivers[key] = ServedDriver(label, argv, cwd)
        return driver


@atexit.register
def stop_served_drivers() -> None:
    with _drivers_lock:
        drivers = list(_drivers.values()) if _drivers_pid == os.getpid() else []
        _drivers.clear()
    for driver in drivers:
        driver.stop()
