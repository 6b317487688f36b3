"""docs/production.md's host: Debian's nginx, configured as the doc says, in front of uvicorn.

The site block and the web command are read from the doc (``<!-- nginx: site -->``,
``<!-- nginx: web -->``); only the ports, the upstream's address and the certificate change
(tests/support/nginx.py). The web process runs with the README's production HTTPS settings.
Through nginx: a paced v2 run arrives token by token (HTTP/1.1 and HTTP/2), a websocket
subscription runs its turn to the end, Django sees the requests as secure and the admin's login
passes its CSRF check, and the runtime, not nginx, refuses a body above MAX_BODY_BYTES.
"""

from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import trustme
from websockets.sync.client import connect

from copilot_runtime.auth import do_issue_token
from copilot_runtime.conf import DEFAULTS
from tests.e2e.conftest import UVICORN, current_database_url
from tests.faults.traffic import fake, run_body
from tests.support.generate_e2e import GRAPHQL_PATH, generate_data, server_env, text_input
from tests.support.nginx import (
    Nginx,
    directives,
    documented_block,
    running_nginx,
    site_for_test,
    web_command_for_test,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcessFactory

pytestmark = pytest.mark.e2e

RUN_PATH = "/api/copilotkit/agent/default/run"
# 20 tokens 100 ms apart: about two seconds of stream.
PACED = {"tokens": 20, "delay_ms": 100}
PACED_TEXT = "t0" + "".join(f" t{index}" for index in range(1, 20))
# Far below the ~1.9 s the tokens take, far above what one buffered write would spread over.
SPREAD_SECONDS = 1.0
WAIT_SECONDS = 30.0
ADMIN_PASSWORD = "nginx-admin-password-123"
COPILOT_STREAM = """
subscription Stream($data: GenerateCopilotResponseInput!) {
  copilotStream(data: $data) { sequence type delta }
}
"""


@dataclass
class Host:
    """The doc's host on this machine: nginx in front of one web process."""

    nginx: Nginx
    web_url: str
    trust: ssl.SSLContext
    ca_path: Path
    token: str

    @property
    def url(self) -> str:
        return self.nginx.https_url

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=self.trust, timeout=WAIT_SECONDS)

    def bearer(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"}


@pytest.fixture
def host(
    transactional_db: None,
    served_process_factory: ServedProcessFactory,
    base_subprocess_env: dict[str, str],
    fake_upstream: FakeUpstream,
    unused_tcp_port_factory: Callable[[], int],
    django_user_model: Any,
    tmp_path: Path,
) -> Iterator[Host]:
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1")
    certificate, key, ca_path = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    issued.private_key_pem.write_to_path(str(key))
    for index, blob in enumerate(issued.cert_chain_pems):
        blob.write_to_path(str(certificate), append=index > 0)
    authority.cert_pem.write_to_path(str(ca_path))
    trust = ssl.create_default_context()
    authority.configure_trust(trust)

    web_port, http_port, https_port = (unused_tcp_port_factory() for _ in range(3))
    command = web_command_for_test(documented_block("web"), port=web_port, uvicorn=UVICORN)
    env = {
        **base_subprocess_env,
        "DATABASE_URL": current_database_url(),
        **server_env(fake_upstream.base_url),
        # The README's production settings, HTTPS behind the TLS-terminating proxy included.
        "ENVIRONMENT": "production",
        "DEBUG": "false",
        "SECRET_KEY": "nginx-test-" + uuid.uuid4().hex,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
        "SECURE_SSL_REDIRECT": "true",
        "SECURE_HSTS_SECONDS": "31536000",
    }
    web = served_process_factory(command, port=web_port, env=env, health_path="/healthz")

    admin = django_user_model.objects.create_superuser(
        username="admin", email="admin@example.com", password=ADMIN_PASSWORD
    )
    _row, token = do_issue_token(user=admin, name="nginx")
    site = site_for_test(
        documented_block("site"),
        http_port=http_port,
        https_port=https_port,
        upstreams=[f"127.0.0.1:{web_port}"],
        certificate=certificate,
        key=key,
    )
    with running_nginx(
        site, prefix=tmp_path / "nginx", http_port=http_port, https_port=https_port, trust=trust
    ) as nginx:
        yield Host(nginx=nginx, web_url=web.url, trust=trust, ca_path=ca_path, token=token)


# --- what the doc's numbers promise ---------------------------------------------------------------


def _seconds(value: str) -> float:
    """An nginx time (``660s``, ``11m``, ``500ms``; a bare number is seconds)."""
    parsed = re.fullmatch(r"(\d+)(ms|s|m|h)?", value)
    assert parsed is not None, value
    number, unit = parsed.groups()
    return int(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit or "s"]


def _bytes(value: str) -> int:
    """An nginx size (``11m``, ``512k``; a bare number is bytes)."""
    parsed = re.fullmatch(r"(\d+)([kKmMgG])?", value)
    assert parsed is not None, value
    number, unit = parsed.groups()
    return int(number) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[(unit or "").lower()]


def test_the_documented_site_fits_the_runtimes_limits() -> None:
    """The site's timeouts and body size against conf.py's defaults: raising a limit there
    without the doc fails here."""
    found = directives(documented_block("site"))
    assert _seconds(found["proxy_read_timeout"][0][0]) > DEFAULTS["RUN_TIME_LIMIT_SECONDS"]
    assert _bytes(found["client_max_body_size"][0][0]) > DEFAULTS["MAX_BODY_BYTES"]
    headers = {arguments[0]: arguments[1] for arguments in found["proxy_set_header"]}
    assert headers == {
        "Upgrade": "$http_upgrade",
        "Connection": "$connection_upgrade",
        "Host": "$http_host",
        "X-Forwarded-For": "$proxy_add_x_forwarded_for",
        "X-Forwarded-Proto": "$scheme",
    }
    assert found["proxy_http_version"] == [["1.1"]]
    # Nothing turns the runtime's X-Accel-Buffering: no into buffering again.
    assert "proxy_ignore_headers" not in found and "proxy_buffering" not in found
    # The upstream keeps idle connections shorter than the documented uvicorn does.
    web = web_command_for_test(documented_block("web"), port=8000, uvicorn=UVICORN)
    uvicorn_keepalive = int(web[web.index("--timeout-keep-alive") + 1])
    assert _seconds(found["keepalive_timeout"][0][0]) < uvicorn_keepalive
    assert "--proxy-headers" in web and "--forwarded-allow-ips" in web


# --- streams --------------------------------------------------------------------------------------


def _assert_token_by_token(arrivals: list[tuple[float, dict[str, Any]]]) -> None:
    """A paced run's SSE events as they arrived: its text came over time, not in one lump."""
    types = [event["type"] for _at, event in arrivals]
    assert types[-1:] == ["RUN_FINISHED"] and "RUN_ERROR" not in types, types
    contents = [(at, event) for at, event in arrivals if event["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(event["delta"] for _at, event in contents) == PACED_TEXT
    first, last, finished = contents[0][0], contents[-1][0], arrivals[-1][0]
    assert last - first > SPREAD_SECONDS, [round(at - first, 3) for at, _event in contents]
    assert finished - first > SPREAD_SECONDS, (first, finished)
    assert len({round(at, 2) for at, _event in contents}) >= 10, "the tokens came in a few lumps"


def _sse_events(lines: Iterator[tuple[float, str]]) -> list[tuple[float, dict[str, Any]]]:
    return [(at, json.loads(line[6:])) for at, line in lines if line.startswith("data: ")]


def test_a_paced_run_streams_token_by_token_through_nginx(host: Host) -> None:
    # HTTP/1.1 (httpx).
    body = run_body("nginx-http1", fake(PACED))
    headers = {"accept": "text/event-stream", **host.bearer()}
    with (
        host.client() as client,
        client.stream("POST", RUN_PATH, json=body, headers=headers) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.http_version == "HTTP/1.1"
        # (nginx acts on the runtime's X-Accel-Buffering and does not pass it on.)
        assert response.headers["cache-control"] == "no-cache, no-transform"
        # SecurityMiddleware adds HSTS to secure requests only: Django saw https.
        assert "strict-transport-security" in response.headers
        arrivals = _sse_events((time.monotonic(), line) for line in response.iter_lines())
    _assert_token_by_token(arrivals)

    # HTTP/2 (curl, which prints the stream as it arrives).
    curl = shutil.which("curl")
    assert curl is not None, "curl is not installed (scripts/test.sh installs it)"
    body_path = host.ca_path.with_name("run.json")
    body_path.write_text(json.dumps(run_body("nginx-http2", fake(PACED))))
    command = [
        curl, "--silent", "--show-error", "--no-buffer", "--http2", "--max-time", "30",
        "--cacert", str(host.ca_path), "--header", "content-type: application/json",
        "--header", "accept: text/event-stream",
        "--header", f"authorization: Bearer {host.token}",
        "--data-binary", f"@{body_path}", "--write-out", "\nhttp_version=%{http_version}\n",
        host.url + RUN_PATH,
    ]  # fmt: skip
    lines = _timed_lines(command)
    assert lines[-1][1] == "http_version=2", lines[-3:]
    _assert_token_by_token(_sse_events(iter(lines)))


def _timed_lines(command: list[str]) -> list[tuple[float, str]]:
    """The lines a command prints, each with the moment it was read (bounded: WAIT_SECONDS)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert process.stdout is not None
        for raw in iter(process.stdout.readline, b""):
            lines.append((time.monotonic(), raw.decode().rstrip("\r\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        process.wait(timeout=WAIT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
    reader.join(timeout=5)
    assert process.stderr is not None
    assert process.returncode == 0, (process.returncode, process.stderr.read(), lines[-5:])
    return lines


# --- websockets -----------------------------------------------------------------------------------


def test_a_websocket_subscription_runs_its_turn_through_nginx(host: Host) -> None:
    data = generate_data(
        thread_id="nginx-ws",
        messages=[text_input(f"user-{uuid.uuid4()}", fake(PACED))],
        page_url=f"{host.url}/chat",
    )
    # The page's own origin, as a browser on it sends: same-origin for the Host nginx forwards.
    with connect(
        host.url.replace("https://", "wss://") + GRAPHQL_PATH,
        subprotocols=["graphql-transport-ws"],
        origin=host.url,
        ssl=host.trust,
        open_timeout=10,
    ) as socket:  # fmt: skip
        assert socket.subprotocol == "graphql-transport-ws"
        socket.send(json.dumps({"type": "connection_init", "payload": {"token": host.token}}))
        assert json.loads(socket.recv(timeout=10))["type"] == "connection_ack"
        subscribe = {"query": COPILOT_STREAM, "variables": {"data": data}}
        socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": subscribe}))
        arrivals: list[tuple[float, dict[str, Any]]] = []
        while True:
            message = json.loads(socket.recv(timeout=WAIT_SECONDS))
            if message["type"] == "complete":
                break
            assert message["type"] == "next", message
            assert not message["payload"].get("errors"), message
            arrivals.append((time.monotonic(), message["payload"]["data"]["copilotStream"]))
    types = [event["type"] for _at, event in arrivals]
    assert types[-1:] == ["run_finished"] and "run_error" not in types, types
    deltas = [(at, event) for at, event in arrivals if event["type"] == "text_delta"]
    assert "".join(event["delta"] for _at, event in deltas) == PACED_TEXT
    assert deltas[-1][0] - deltas[0][0] > SPREAD_SECONDS, len(deltas)


# --- Django behind the proxy ----------------------------------------------------------------------


def test_django_sees_the_clients_host_and_https_through_nginx(host: Host) -> None:
    with host.client() as client:
        hello = client.post(GRAPHQL_PATH, json={"query": "{hello}"}, headers=host.bearer())
        assert hello.status_code == 200 and hello.json()["data"]["hello"], hello.text
        assert client.get("/readyz").status_code == 200

        # The admin's login: no HTTPS redirect (Django sees https), and its CSRF origin check
        # passes (Host and scheme are the client's) without CSRF_TRUSTED_ORIGINS.
        form = client.get("/admin/login/")
        assert form.status_code == 200, (form.status_code, form.headers.get("location"))
        assert "strict-transport-security" in form.headers
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert csrf is not None, form.text[:500]
        login = client.post(
            "/admin/login/?next=/admin/",
            data={
                "csrfmiddlewaretoken": csrf.group(1),
                "username": "admin",
                "password": ADMIN_PASSWORD,
                "next": "/admin/",
            },
            headers={"origin": host.url, "referer": f"{host.url}/admin/login/"},
        )
        assert login.status_code == 302 and login.headers["location"] == "/admin/", login.text
        assert client.get("/admin/").status_code == 200

        # A body above MAX_BODY_BYTES reaches the runtime, which refuses it in its own words.
        oversized = run_body("nginx-large", "x" * (DEFAULTS["MAX_BODY_BYTES"] + 1024))
        refused = client.post(RUN_PATH, json=oversized, headers=host.bearer())
        assert refused.status_code == 413, refused.text[:300]
        assert refused.headers["content-type"].startswith("application/json"), refused.text[:300]

    # Straight to the web process, without the proxy's header, the same page is redirected:
    # the HTTPS settings are in force, and nginx's X-Forwarded-Proto is what satisfies them.
    direct = httpx.get(f"{host.web_url}/admin/login/", timeout=WAIT_SECONDS)
    assert direct.status_code == 301 and direct.headers["location"].startswith("https://")

    # Plain HTTP on the site's port 80 server goes to HTTPS.
    plain = httpx.get(f"{host.nginx.http_url}/admin/", timeout=WAIT_SECONDS)
    assert plain.status_code == 301
    assert plain.headers["location"] == "https://127.0.0.1/admin/"
