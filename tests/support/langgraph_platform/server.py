"""A real local LangGraph server (``langgraph dev``: langgraph-api with the in-memory runtime,
from PyPI) serving tests/support/langgraph_platform/graph.py, whose model is the fake upstream.
Started as a subprocess on a free loopback port; its output goes to a log file."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

import httpx

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
_START_TIMEOUT_S = 60.0


def _free_port() -> int:
    from tests.support.workers import free_port

    return free_port()


class LangGraphServer:
    def __init__(self, *, model_base_url: str, log_path: Path) -> None:
        self.model_base_url = model_base_url
        self.log_path = log_path
        self.port = _free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        # The dev server saves its threads under .langgraph_api and loads them back on start:
        # every session starts from an empty server.
        shutil.rmtree(HERE / ".langgraph_api", ignore_errors=True)
        env = {
            **os.environ,
            "FAKE_MODEL_BASE_URL": self.model_base_url,
            "PYTHONPATH": str(REPO_ROOT),
            "LANGSMITH_TRACING": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        }
        command = [
            str(Path(sys.executable).parent / "langgraph"),
            "dev",
            "--no-browser",
            "--no-reload",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--config",
            str(HERE / "langgraph.json"),
        ]
        log = self.log_path.open("wb")
        self._process = subprocess.Popen(
            command, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"langgraph dev exited with {self._process.returncode}:\n"
                    + self.log_path.read_text(errors="replace")[-3000:]
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/ok", timeout=1).status_code == 200:
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("langgraph dev did not answer /ok in time")

    def stop(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGTERM)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
