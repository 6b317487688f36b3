"""``make bench``'s host row: the conversation load against a team's own Django project.

The ``conv`` row measures the standalone site; a team that adds the runtime to its own project
(README.md, "Add it to an existing Django project") serves that project instead, with Django's
default middleware and its own settings. This row builds such a host (``host_project.
build_host``), migrates and checks it with its own ``manage.py``, serves it under uvicorn (the
standalone's flags: uvloop, httptools, one process) and under daphne, and measures both with
the ``conv`` load (C users continuing their threads, 50-token replies, v1 and v2), alternated
with TS and the standalone site in the same rounds (side_by_side.run calls ``start_hosts`` and
``alternate``). The table shows each host's figures against TS and against the standalone.

Database: the host gets a database of its own on the bench's PostgreSQL cluster, migrated by
its own ``manage.py migrate`` (step 4 is part of what is built: startproject's apps and the
runtime's, not the standalone site's migrations standing in for them), and its rows do not grow
the tables the standalone's windows write to. One cluster, so PostgreSQL's CPU per request is
counted alike (the postmaster's process tree). A role that may not create databases (an outside
``DATABASE_URL``) shares the bench's database instead, already migrated; ``results["host"]``
says which.

This module imports nothing from side_by_side: that runs as ``__main__``, and importing it
again would make a second copy of its module state (its ``BYSTANDERS``).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from benchmarks.conversation import V1, V2
from benchmarks.host_project import HostProject, build_host
from benchmarks.postgres import free_port
from benchmarks.processes import (
    DAPHNE_SERVER,
    UVICORN_SERVER,
    Managed,
    ProcessFailed,
    start_process,
    start_server,
)
from benchmarks.table import OURS, TS, Row

# The row's sides besides TS and the standalone site: their keys in the results and server.
HOST_SIDES = {"host_uvicorn": UVICORN_SERVER, "host_daphne": DAPHNE_SERVER}


def host_database(database_url: str, stack: contextlib.ExitStack) -> tuple[str, str]:
    """The host's database URL and ``"own"`` (created on the bench's cluster, dropped when
    ``stack`` closes) or ``"shared"`` (the bench's own, when the role may not create one)."""
    name = f"bench_host_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.errors.InsufficientPrivilege:
        print("[bench] host: may not create a database, sharing the bench's", flush=True)
        return database_url, "shared"
    stack.callback(_drop_database, database_url, name)
    return urlunsplit(urlsplit(database_url)._replace(path=f"/{name}")), "own"


def _drop_database(database_url: str, name: str) -> None:
    try:
        with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as connection:
            statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            connection.execute(statement.format(sql.Identifier(name)))
    except psycopg.Error as exc:  # an outside server keeps it; say so rather than fail the run
        print(f"[bench] host: could not drop database {name}: {exc}", flush=True)


def _manage(host: HostProject, *arguments: str, env: dict[str, str], log_dir: Path) -> Managed:
    """``manage.py <arguments>`` run to its end from the host's directory, its output logged."""
    managed = start_process(
        f"host-{arguments[0]}",
        host.manage_command(*arguments),
        env=env,
        log_dir=log_dir,
        cwd=host.site,
    )
    try:
        returncode = managed.process.wait(timeout=180)
    except subprocess.TimeoutExpired:
        managed.stop()
        raise ProcessFailed(
            f"host {arguments[0]} took over 180 s\n{managed.output_tail()}"
        ) from None
    if returncode != 0:
        raise ProcessFailed(f"host {arguments[0]} failed ({returncode})\n{managed.output_tail()}")
    return managed


def start_hosts(
    *, env: dict[str, str], log_dir: Path, stack: contextlib.ExitStack
) -> tuple[dict[str, tuple[str, Managed]], dict[str, Any]]:
    """Build, migrate and check a host, then serve it under each of ``HOST_SIDES``; returns
    {side: (base URL, process)} and what the results record of the host. Everything started
    is stopped (and the directory and database removed) when ``stack`` closes."""
    database_url, database = host_database(env["DATABASE_URL"], stack)
    directory = Path(tempfile.mkdtemp(prefix="copilot-bench-host."))
    stack.callback(shutil.rmtree, directory, True)
    host = build_host(directory / "site")
    host_env = host.environment(env, database_url=database_url)
    _manage(host, "migrate", "--noinput", env=host_env, log_dir=log_dir)
    check = _manage(host, "check", env=host_env, log_dir=log_dir)
    started: dict[str, tuple[str, Managed]] = {}
    for side, server in HOST_SIDES.items():
        port = free_port()
        managed = start_server(
            port=port,
            env=host_env,
            log_dir=log_dir,
            server=server,
            name=side.replace("_", "-"),
            cwd=host.site,
            application=host.application,
        )
        stack.callback(managed.stop)
        started[side] = (f"http://127.0.0.1:{port}", managed)
    record = {
        "database": database,
        "site": str(host.site),
        "application": host.application,
        # What step 4's check said (copilot_runtime's warnings with DEBUG off, W010 if any).
        "check": (check.stderr_path.read_text() + check.stdout_path.read_text()).strip(),
    }
    return started, record


# --- the table -------------------------------------------------------------------------------

AGAINST_TS = (
    ("req/s", "req_s", True),
    ("TTFT p50 ms", "ttft_p50_ms", False),
    ("server CPU ms/req", "cpu_ms_per_req", False),
    ("peak RSS MiB", "peak_rss_mib", False),
    ("failed requests", "failures", False),
)
AGAINST_STANDALONE = (
    ("req/s", "req_s", True),
    ("server CPU ms/req", "cpu_ms_per_req", False),
    ("peak RSS MiB", "peak_rss_mib", False),
)


def _figure(side: dict[str, Any] | None, key: str) -> float | None:
    return None if side is None else side.get(key)


def host_table_rows(results: dict[str, Any]) -> list[Row]:
    """Per protocol: TS against the standalone site in this row's own rounds, then each host
    against TS and against the standalone (the ratio above 1: the host ahead)."""
    rows: list[Row] = []
    users = results["args"]["users"]
    for protocol, name in ((V1, "v1"), (V2, "v2")):
        entry = results["rows"].get(f"host_{protocol}") or {}
        ts, standalone = entry.get(TS), entry.get(OURS)
        if not any(entry.get(side) for side in HOST_SIDES):
            continue
        rows.append(
            Row(
                label=f"{name} host row C={users} (TS | standalone)",
                metric="req/s",
                ts=_figure(ts, "req_s"),
                ours=_figure(standalone, "req_s"),
                higher_is_better=True,
                columns=("TS", "standalone"),
            )
        )
        for side, server in HOST_SIDES.items():
            host = entry.get(side)
            if host is None:
                continue
            for against, reference, metrics in (
                ("TS", ts, AGAINST_TS),
                ("standalone", standalone, AGAINST_STANDALONE),
            ):
                for metric, key, higher in metrics:
                    rows.append(
                        Row(
                            label=f"{name} host {server} C={users} ({against} | host)",
                            metric=metric,
                            ts=_figure(reference, key),
                            ours=host.get(key),
                            higher_is_better=higher,
                            columns=(against, f"host {server}"),
                        )
                    )
    return rows
