"""The benchmark's host row: the host project the README's steps make, its database, the host
served under uvicorn and daphne answering the load generator's turns, and the row's lines in
the table."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from benchmarks.conversation import V1, V2, Conversation, Turn, new_session, send_turn
from benchmarks.host_project import HostProject, build_host
from benchmarks.host_row import HOST_SIDES, host_database, host_table_rows, start_hosts
from benchmarks.processes import new_log_dir
from benchmarks.side_by_side import bench_environment, project_failures, table_rows
from benchmarks.table import format_table, ratio

STARTPROJECT_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# Run in the host by `manage.py shell`: what its settings, URLs and ASGI entry came to.
PROBE = """
import json
from django.conf import settings
from django.urls import resolve
from copilot_runtime.conf import anonymous_allowed
import mysite.asgi
print(json.dumps({
    "debug": settings.DEBUG,
    "apps": settings.INSTALLED_APPS,
    "middleware": settings.MIDDLEWARE,
    "anonymous": anonymous_allowed(),
    "layer": settings.CHANNEL_LAYERS["default"]["BACKEND"],
    "database": settings.DATABASES["default"]["NAME"],
    "runtime": resolve("/api/copilotkit").func.__module__,
    "healthz": resolve("/healthz").url_name,
    "application": type(mysite.asgi.application).__module__,
}))
"""


def suite_database_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        pytest.fail("DATABASE_URL is not set: run the suite with scripts/test.sh (make test)")
    return url


def manage(host: HostProject, *arguments: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        host.manage_command(*arguments),
        cwd=host.site,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


# --- the host the documented steps make ---------------------------------------------------------


def test_the_host_is_startproject_with_the_documented_steps_and_its_middleware_kept(
    tmp_path: Path,
) -> None:
    host = build_host(tmp_path / "site")
    # A database nothing connects to: building and checking the host needs none.
    env = host.environment(
        {**os.environ, "DJANGO_SETTINGS_MODULE": "copilot_runtime.site.settings"},
        database_url="postgres://nobody:secret@127.0.0.1:9/host_probe",
    )

    printed = manage(host, "shell", "-c", PROBE, env=env).splitlines()
    found = json.loads([line for line in printed if line.startswith("{")][-1])

    assert env["DJANGO_SETTINGS_MODULE"] == "mysite.settings"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(host.site)
    assert host.application == "mysite.asgi:application"
    assert found["debug"] is False and found["anonymous"] is True
    assert found["apps"][-3:] == ["copilot_runtime", "conversations", "agents"]
    assert "django.contrib.admin" in found["apps"]
    expected = list(STARTPROJECT_MIDDLEWARE)
    expected[1:1] = [
        "copilot_runtime.http.static.StaticFilesMiddleware",
        "copilot_runtime.http.cors.RuntimeCorsMiddleware",
    ]
    assert found["middleware"] == expected
    assert found["layer"] == "channels.layers.InMemoryChannelLayer"
    assert found["database"] == "host_probe"
    assert found["runtime"].startswith("copilot_runtime.")
    assert found["healthz"]
    assert found["application"] != "django.core.handlers.asgi"  # the runtime's entry, in front
    asgi = (host.site / "mysite" / "asgi.py").read_text()
    assert "application = runtime_application(django_asgi_app)" in asgi
    # Step 4's check: the front honours or replaces every startproject middleware (no W010).
    assert "copilot_runtime.W010" not in manage(host, "check", env=env)


def test_the_host_gets_a_database_of_its_own_dropped_at_the_end() -> None:
    admin_url = suite_database_url()

    def names() -> set[str]:
        with psycopg.connect(admin_url, autocommit=True) as connection:
            rows = connection.execute("SELECT datname FROM pg_database").fetchall()
        return {row[0] for row in rows}

    with contextlib.ExitStack() as stack:
        url, database = host_database(admin_url, stack)
        name = url.rsplit("/", 1)[-1].split("?")[0]
        assert database == "own" and name.startswith("bench_host_") and name in names()
        with psycopg.connect(url) as connection:  # the URL reaches it
            assert connection.execute("SELECT current_database()").fetchone() == (name,)
    assert name not in names()


# --- the host served as the row serves it --------------------------------------------------------


def test_the_host_answers_the_load_generators_turns_under_uvicorn_and_daphne(
    fake_upstream: Any,
) -> None:
    port = int(fake_upstream.base_url.split(":")[-1].split("/")[0])
    env = bench_environment(suite_database_url(), port)
    with contextlib.ExitStack() as stack:
        started, record = start_hosts(env=env, log_dir=new_log_dir(), stack=stack)

        async def two_turns(url: str, protocol: str) -> list[Turn]:
            async with new_session(1) as session:
                conversation = Conversation(protocol, tokens=5)
                return [await send_turn(session, url, conversation) for _ in range(2)]

        answered = {
            (side, protocol): asyncio.run(two_turns(url, protocol))
            for side, (url, _) in started.items()
            for protocol in (V1, V2)
        }
        processes = [managed for _, managed in started.values()]
        assert all(managed.process.poll() is None for managed in processes)
    assert all(managed.process.poll() is not None for managed in processes)  # stopped

    assert set(started) == set(HOST_SIDES) == {"host_uvicorn", "host_daphne"}
    assert record["database"] == "own" and record["application"] == "mysite.asgi:application"
    assert "W010" not in record["check"]
    for key, turns in answered.items():
        assert [turn.failure for turn in turns] == ["", ""], key
        assert all("".join(turn.text) == "t0 t1 t2 t3 t4" for turn in turns), key
    # The second turn re-sent the first exchange: the host kept the thread's history.
    last = fake_upstream.requests()[-1]
    assert [m["role"] for m in last["messages"] if m["role"] != "system"] == [
        "user",
        "assistant",
        "user",
    ]


# --- the table -----------------------------------------------------------------------------------


def figures(req_s: float, cpu: float, rss: float, failures: int = 0) -> dict[str, Any]:
    return {
        "req_s": req_s,
        "ttft_p50_ms": 1000 / req_s,
        "cpu_ms_per_req": cpu,
        "peak_rss_mib": rss,
        "failures": failures,
    }


def host_results() -> dict[str, Any]:
    row = {
        "ts": figures(100.0, 10.0, 300.0),
        "ours": figures(400.0, 2.0, 100.0),
        "host_uvicorn": figures(300.0, 2.5, 120.0),
        "host_daphne": figures(200.0, 4.0, 125.0),
    }
    return {"args": {"users": 50}, "rows": {f"host_{V1}": row, f"host_{V2}": dict(row)}}


def test_the_host_rows_set_each_server_against_ts_and_against_the_standalone_site() -> None:
    rows = {(row.label, row.metric): row for row in host_table_rows(host_results())}

    reference = rows[("v1 host row C=50 (TS | standalone)", "req/s")]
    assert (reference.ts, reference.ours, ratio(reference)) == (100.0, 400.0, 4.0)
    uvicorn_ts = rows[("v1 host uvicorn C=50 (TS | host)", "req/s")]
    assert (uvicorn_ts.ts, uvicorn_ts.ours, ratio(uvicorn_ts)) == (100.0, 300.0, 3.0)
    uvicorn_alone = rows[("v1 host uvicorn C=50 (standalone | host)", "req/s")]
    assert (uvicorn_alone.ts, uvicorn_alone.ours, ratio(uvicorn_alone)) == (400.0, 300.0, 0.75)
    daphne_alone = rows[("v2 host daphne C=50 (standalone | host)", "req/s")]
    assert ratio(daphne_alone) == 0.5
    cpu = rows[("v2 host daphne C=50 (standalone | host)", "server CPU ms/req")]
    assert ratio(cpu) == 0.5  # twice the standalone's CPU per request
    rss = rows[("v1 host uvicorn C=50 (TS | host)", "peak RSS MiB")]
    assert ratio(rss) == 2.5
    assert rows[("v1 host daphne C=50 (TS | host)", "failed requests")].ours == 0
    assert {label.split(" C=")[0] for label, _ in rows} == {
        "v1 host row",
        "v1 host uvicorn",
        "v1 host daphne",
        "v2 host row",
        "v2 host uvicorn",
        "v2 host daphne",
    }


def test_the_host_rows_are_in_the_bench_table_and_their_failures_in_its_exit_status() -> None:
    results = host_results()
    results["rows"][f"conv_{V1}"] = {"ts": None, "ours": figures(400.0, 2.0, 100.0)}

    table = format_table(table_rows(results))

    lines = table.splitlines()
    conv = next(i for i, line in enumerate(lines) if line.startswith("v1 conversation C=50"))
    host = next(i for i, line in enumerate(lines) if "host uvicorn" in line and "req/s" in line)
    assert conv < host  # beside the conversation row the host's load repeats
    assert lines[host].split()[-1] == "3.00x"
    assert project_failures(results) == 0
    results["rows"][f"host_{V2}"]["host_daphne"] = figures(200.0, 4.0, 125.0, failures=2)
    assert project_failures(results) == 2


def test_a_run_without_the_host_row_shows_none_of_its_lines_and_no_ts_shows_dashes() -> None:
    assert host_table_rows({"args": {"users": 50}, "rows": {}}) == []
    results = host_results()
    for row in results["rows"].values():
        row["ts"] = None
    rows = host_table_rows(results)
    against_ts = [row for row in rows if "(TS |" in row.label]
    assert against_ts and all(row.ts is None and ratio(row) is None for row in against_ts)
    assert all(ratio(row) is not None for row in rows if "(standalone | host)" in row.label)
