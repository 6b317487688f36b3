"""Debian's nginx in front of a served web process, configured from docs/production.md.

``documented_block(marker)`` is the fenced code block that follows ``<!-- nginx: <marker> -->``
in docs/production.md. ``site_for_test`` changes only what names the documented host in the
site block: each ``listen`` line moves to a loopback port (the IPv6 ones are dropped), the
upstream's ``server`` lines name the test's web processes and the ``ssl_certificate`` lines a
throwaway certificate. ``web_command_for_test`` does the same for the web process's command
(its ``--port``, and the virtualenv's uvicorn). ``running_nginx`` serves a site from a temporary
prefix (its own ``nginx.conf`` with the ``http`` settings of Debian's, temporary paths for
everything nginx writes), in the foreground, and stops it on exit.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import re
import shlex
import shutil
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "production.md"
DEBIAN_MIME_TYPES = Path("/etc/nginx/mime.types")
START_TIMEOUT_SECONDS = 15.0
STOP_GRACE_SECONDS = 5.0


def nginx_binary() -> str | None:
    """Debian's nginx (/usr/sbin, which is not on every user's PATH), or one on PATH."""
    if os.access("/usr/sbin/nginx", os.X_OK):
        return "/usr/sbin/nginx"
    return shutil.which("nginx")


def documented_block(marker: str, doc: Path = DOC) -> str:
    """The fenced block right after ``<!-- nginx: <marker> -->`` (exactly one in the doc)."""
    pattern = re.compile(
        rf"^<!-- nginx: {re.escape(marker)} -->\n```[\w-]*\n(.*?)^```$", re.MULTILINE | re.DOTALL
    )
    found = pattern.findall(doc.read_text())
    assert len(found) == 1, f"{doc} has {len(found)} blocks marked <!-- nginx: {marker} -->"
    return found[0]


def directives(block: str) -> dict[str, list[list[str]]]:
    """Each simple directive's arguments by name, in order (comments and braces left out)."""
    found: dict[str, list[list[str]]] = {}
    for line in block.splitlines():
        code = line.split("#", 1)[0].strip()
        if not code.endswith(";"):
            continue
        name, *arguments = code[:-1].split()
        found.setdefault(name, []).append(arguments)
    return found


def site_for_test(
    site: str,
    *,
    http_port: int,
    https_port: int,
    upstreams: Sequence[str],
    certificate: Path,
    key: Path,
) -> str:
    """The documented site with this host's names replaced (and nothing else changed)."""
    lines: list[str] = []
    replaced = {"listen": 0, "server": 0, "ssl_certificate": 0, "ssl_certificate_key": 0}
    in_upstream = False
    for line in site.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        words = line.split("#", 1)[0].strip().rstrip(";").split()
        name = words[0] if words else ""
        if name == "upstream":
            in_upstream = True
        elif in_upstream and name == "}":
            in_upstream = False
        elif in_upstream and name == "server":
            if replaced["server"] == 0:
                lines.extend(f"{indent}server {address};" for address in upstreams)
            replaced["server"] += 1
            continue
        elif name == "listen":
            if words[1].startswith("["):
                continue  # IPv6: the test listens on 127.0.0.1 only
            port = https_port if "ssl" in words[2:] else http_port
            line = f"{indent}listen {' '.join([f'127.0.0.1:{port}', *words[2:]])};"
            replaced["listen"] += 1
        elif name == "ssl_certificate":
            line = f"{indent}ssl_certificate {certificate};"
            replaced["ssl_certificate"] += 1
        elif name == "ssl_certificate_key":
            line = f"{indent}ssl_certificate_key {key};"
            replaced["ssl_certificate_key"] += 1
        lines.append(line)
    assert replaced == {"listen": 2, "server": replaced["server"], "ssl_certificate": 1,
                        "ssl_certificate_key": 1} and replaced["server"] >= 1, (
        f"the documented site no longer has the lines the test replaces: {replaced}"
    )  # fmt: skip
    return "\n".join(lines) + "\n"


def web_command_for_test(documented: str, *, port: int, uvicorn: Path) -> list[str]:
    """The documented web command (one shell command, ``\\`` continuations) on ``port``."""
    command = shlex.split(documented.replace("\\\n", " "))
    assert Path(command[0]).name == "uvicorn", command
    assert command.count("--port") == 1, command
    command[0] = str(uvicorn)
    command[command.index("--port") + 1] = str(port)
    return command


def nginx_conf(prefix: Path, site: Path) -> str:
    """A minimal ``nginx.conf``: Debian's ``http`` settings, everything it writes in ``prefix``.

    As root, the workers run as root too (nginx's default, ``nobody``, could not reach the
    test's temporary directories); otherwise there is no ``user`` to switch to."""
    if os.geteuid() == 0:
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"
    else:
        user = ""
    mime_types = f"include {DEBIAN_MIME_TYPES};" if DEBIAN_MIME_TYPES.exists() else ""
    temp = "\n".join(
        f"    {kind}_temp_path {prefix / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""{user}
worker_processes 1;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} notice;

events {{
    worker_connections 1024;
}}

http {{
    # Debian 12's /etc/nginx/nginx.conf, its http block (logs and includes moved here).
    sendfile on;
    tcp_nopush on;
    types_hash_max_size 2048;
    {mime_types}
    default_type application/octet-stream;
    ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3;
    ssl_prefer_server_ciphers on;
    access_log {prefix / "access.log"};
    gzip on;

{temp}

    include {site};
}}
"""


@dataclass
class Nginx:
    process: subprocess.Popen[bytes]
    prefix: Path
    https_url: str
    http_url: str

    def error_log(self) -> str:
        path = self.prefix / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """SIGTERM (nginx's fast shutdown: open streams are cut; the master waits for its
        workers), then SIGKILL to the whole process group if it lingers."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_GRACE_SECONDS)


@contextlib.contextmanager
def running_nginx(
    site_text: str, *, prefix: Path, http_port: int, https_port: int, trust: ssl.SSLContext
) -> Iterator[Nginx]:
    """nginx serving ``site_text`` in the foreground until the block exits; ready once the
    site's HTTPS server answers ``/healthz`` with 200 (15 s, its error log in the failure)."""
    binary = nginx_binary()
    assert binary is not None, "nginx is not installed (scripts/test.sh installs Debian's)"
    prefix.mkdir(parents=True, exist_ok=True)
    site = prefix / "copilot.conf"
    site.write_text(site_text)
    conf = prefix / "nginx.conf"
    conf.write_text(nginx_conf(prefix, site))
    # -e: the log of nginx's own start, before it has read the configuration's error_log.
    base = [binary, "-p", f"{prefix}/", "-c", str(conf), "-e", str(prefix / "error.log")]
    checked = subprocess.run(
        [*base, "-t", "-q"], capture_output=True, text=True, timeout=START_TIMEOUT_SECONDS
    )
    assert checked.returncode == 0, f"nginx -t refused the site:\n{checked.stderr}\n{site_text}"

    output = (prefix / "nginx.out").open("wb")
    process = subprocess.Popen(
        [*base, "-g", "daemon off;"],
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    output.close()
    nginx = Nginx(
        process=process,
        prefix=prefix,
        https_url=f"https://127.0.0.1:{https_port}",
        http_url=f"http://127.0.0.1:{http_port}",
    )
    try:
        _wait_until_serving(nginx, trust)
        yield nginx
    finally:
        nginx.stop()


def _wait_until_serving(nginx: Nginx, trust: ssl.SSLContext) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    last = ""
    with httpx.Client(verify=trust, timeout=2) as client:
        while time.monotonic() < deadline:
            if nginx.process.poll() is not None:
                raise AssertionError(
                    f"nginx exited with code {nginx.process.returncode}:\n{nginx.error_log()}"
                )
            try:
                answer = client.get(f"{nginx.https_url}/healthz")
            except httpx.HTTPError as error:
                last = f"{type(error).__name__}: {error}"
            else:
                if answer.status_code == 200:
                    return
                last = f"{answer.status_code} {answer.text[:200]}"
            time.sleep(0.1)
    raise AssertionError(
        f"nginx did not answer /healthz within {START_TIMEOUT_SECONDS:.0f} s ({last}):\n"
        f"{nginx.error_log()}"
    )
