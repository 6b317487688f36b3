"""HTTP to agent peers (remote CopilotKit endpoints, AG-UI agent servers).

Every call names its peer in its errors, retries like the TypeScript runtime and never hangs:

- headers: ``Content-Type: application/json`` plus the peer's own, from settings (a dict, or a
  dotted path to a callable taking a ``PeerCallContext`` and returning a dict; sync or async);
- retries: up to ``REMOTE_RETRIES`` more attempts on 408, 429, 502, 503, 504 and on connection
  errors, waiting ``REMOTE_RETRY_BASE_SECONDS * 2**n`` capped at ``REMOTE_RETRY_MAX_SECONDS``
  (a ``Retry-After`` header is honoured up to the same cap). A stream is only retried before
  its response starts: once events flowed, a repeat would run the agent's work twice;
- timeouts: ``REMOTE_CONNECT_TIMEOUT_SECONDS`` to connect, and the peer's ``timeout_seconds``
  (default ``REMOTE_READ_TIMEOUT_SECONDS``) for the longest silence while reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from asgiref.sync import sync_to_async
from django.utils.module_loading import import_string

from copilot_runtime.conf import runtime_setting
from copilot_runtime.errors import CopilotKitError, ErrorCode

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})

# RunError codes for failures talking to a peer (the message always names the peer).
UNREACHABLE_CODE = "AGENT_ENDPOINT_UNREACHABLE"
TIMEOUT_CODE = "AGENT_ENDPOINT_TIMEOUT"
HTTP_ERROR_CODE = "AGENT_ENDPOINT_HTTP_ERROR"
NOT_FOUND_CODE = "AGENT_ENDPOINT_NOT_FOUND"
_ERROR_TEXT_LIMIT = 500


@dataclass(frozen=True)
class Peer:
    """One configured peer: what it is (for messages), its base URL and its headers."""

    kind: str  # "remote endpoint" or "AG-UI agent"
    name: str
    url: str
    headers: Any = None  # a dict, a dotted path, a callable, or None
    timeout_seconds: float | None = None

    @property
    def label(self) -> str:
        return f"{self.kind} '{self.name}' ({self.url})"

    def url_for(self, path: str) -> str:
        if not path:
            return self.url
        return self.url.rstrip("/") + "/" + path.lstrip("/")


@dataclass(frozen=True)
class PeerCallContext:
    """What a headers hook is told about the call it adds headers to."""

    peer_name: str
    url: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    thread_id: str | None = None
    agent_name: str | None = None
    # The caller's forwardable headers (v2 requests); the peer's own configured headers win.
    forwarded_headers: Mapping[str, str] = field(default_factory=dict)


class PeerError(CopilotKitError):
    """A peer could not be reached or answered with an error; ``run_code`` names the failure
    for the run's log (``AGENT_ENDPOINT_*``)."""

    def __init__(
        self,
        peer: Peer,
        message: str,
        *,
        run_code: str,
        http_status: int | None = None,
        code: ErrorCode = ErrorCode.NETWORK_ERROR,
    ) -> None:
        super().__init__(f"The {peer.label} {message}", code=code)
        self.peer = peer
        self.run_code = run_code
        self.http_status = http_status

    def details(self) -> dict[str, Any]:
        details: dict[str, Any] = {"peer": self.peer.name, "url": self.peer.url}
        if self.http_status is not None:
            details["statusCode"] = self.http_status
        return details


def _timeout(peer: Peer) -> httpx.Timeout:
    import httpx

    read = peer.timeout_seconds or float(runtime_setting("REMOTE_READ_TIMEOUT_SECONDS"))
    connect = float(runtime_setting("REMOTE_CONNECT_TIMEOUT_SECONDS"))
    return httpx.Timeout(read, connect=connect)


async def peer_headers(peer: Peer, context: PeerCallContext) -> dict[str, str]:
    """The request headers: JSON, then the peer's own (a dict or a hook's answer)."""
    # Names lowercased, so a configured header replaces a forwarded one whatever its case.
    headers = {"content-type": "application/json"}
    headers.update({name.lower(): value for name, value in context.forwarded_headers.items()})
    source = peer.headers
    if not source:
        return headers
    if isinstance(source, str):
        source = import_string(source)
    if callable(source):
        if inspect.iscoroutinefunction(source):
            answered = await source(context)
        else:
            answered = await sync_to_async(source, thread_sensitive=False)(context)
        source = answered or {}
    if not isinstance(source, Mapping):
        raise CopilotKitError(
            f"The headers of the {peer.label} must be a dict (or a hook returning one).",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
    headers.update({str(key).lower(): str(value) for key, value in source.items()})
    return headers


def _backoff(attempt: int, response: httpx.Response | None) -> float:
    cap = float(runtime_setting("REMOTE_RETRY_MAX_SECONDS"))
    delay = float(runtime_setting("REMOTE_RETRY_BASE_SECONDS")) * (2**attempt)
    if response is not None and (retry_after := response.headers.get("retry-after")):
        with contextlib.suppress(ValueError):
            delay = max(delay, float(retry_after))
    return min(delay, cap)


def _error_text(body: bytes) -> str:
    """The ``error`` (or ``detail``) a peer put in its error body, else the body's start."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode(errors="replace").strip()[:_ERROR_TEXT_LIMIT]
    if isinstance(parsed, dict):
        for key in ("error", "detail", "message"):
            value = parsed.get(key)
            if isinstance(value, str) and value:
                return value[:_ERROR_TEXT_LIMIT]
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return value["message"][:_ERROR_TEXT_LIMIT]
    return body.decode(errors="replace").strip()[:_ERROR_TEXT_LIMIT]


async def _http_error(peer: Peer, path: str, response: httpx.Response) -> PeerError:
    body = await response.aread()
    status = response.status_code
    text = _error_text(body)
    suffix = f": {text}" if text else ""
    if status == 404:
        return PeerError(
            peer,
            f"answered 404 for {path or '/'}{suffix}",
            run_code=NOT_FOUND_CODE,
            http_status=status,
            code=ErrorCode.REMOTE_ENDPOINT_NOT_FOUND,
        )
    return PeerError(
        peer,
        f"answered HTTP {status} for {path or '/'}{suffix}",
        run_code=HTTP_ERROR_CODE,
        http_status=status,
        code=ErrorCode.UNKNOWN,
    )


@asynccontextmanager
async def peer_stream(
    peer: Peer,
    *,
    path: str,
    body: Any,
    context: PeerCallContext,
    accept: str = "application/json",
) -> AsyncIterator[httpx.Response]:
    """POST ``body`` and yield the (successful) streaming response; ``PeerError`` otherwise."""
    # Imported on use: a web process whose agents are all local never loads httpx.
    import httpx

    headers = await peer_headers(peer, context)
    headers.setdefault("Accept", accept)
    content = orjson.dumps(body, default=str)
    retries = int(runtime_setting("REMOTE_RETRIES"))
    url = peer.url_for(path)
    async with httpx.AsyncClient(timeout=_timeout(peer)) as client:
        attempt = 0
        while True:
            request = client.build_request("POST", url, content=content, headers=headers)
            try:
                response = await client.send(request, stream=True)
            except httpx.TimeoutException as exc:
                # Only a connect timeout is safe to retry: a read timeout may be a slow agent
                # already at work.
                if isinstance(exc, httpx.ConnectTimeout) and attempt < retries:
                    await asyncio.sleep(_backoff(attempt, None))
                    attempt += 1
                    continue
                raise PeerError(
                    peer,
                    f"did not answer {path or '/'} in time ({type(exc).__name__}) after "
                    f"{attempt + 1} attempt(s).",
                    run_code=TIMEOUT_CODE,
                ) from exc
            except httpx.TransportError as exc:
                if attempt < retries:
                    logger.info("%s unreachable (%s); retrying", peer.label, exc)
                    await asyncio.sleep(_backoff(attempt, None))
                    attempt += 1
                    continue
                raise PeerError(
                    peer,
                    f"is unreachable after {attempt + 1} attempt(s): "
                    f"{str(exc) or type(exc).__name__}",
                    run_code=UNREACHABLE_CODE,
                ) from exc
            if response.status_code in RETRY_STATUSES and attempt < retries:
                delay = _backoff(attempt, response)
                await response.aclose()
                logger.info("%s answered %s; retrying", peer.label, response.status_code)
                await asyncio.sleep(delay)
                attempt += 1
                continue
            break
        try:
            if response.status_code >= 400:
                raise await _http_error(peer, path, response)
            yield response
        finally:
            await response.aclose()


async def peer_post_json(peer: Peer, *, path: str, body: Any, context: PeerCallContext) -> Any:
    """POST ``body`` and return the peer's JSON answer."""
    import httpx

    async with peer_stream(peer, path=path, body=body, context=context) as response:
        try:
            raw = await response.aread()
        except httpx.TimeoutException as exc:
            raise PeerError(
                peer, f"did not finish answering {path} in time.", run_code=TIMEOUT_CODE
            ) from exc
        except httpx.TransportError as exc:
            raise PeerError(
                peer,
                f"broke off its answer to {path}: {str(exc) or type(exc).__name__}",
                run_code=UNREACHABLE_CODE,
            ) from exc
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise PeerError(
            peer,
            f"answered {path} with something that is not JSON.",
            run_code=HTTP_ERROR_CODE,
            code=ErrorCode.UNKNOWN,
        ) from exc
