"""POST a JSON request to a model service and read its server-sent events raw.

Model SDKs configure clients and shape requests well, but their HTTP stack is the largest cost
of a streamed turn here (the ``openai`` package's request pipeline and its httpx-based line
reader cost more of the server's CPU under many concurrent streams than the rest of the turn).
This module is the hot path's transport instead: one keep-alive connection pool per adapter
(per event loop, ``http1.py``), the ``data:`` payloads handed over as bytes in the groups one
read of the socket delivered (the adapters join a group's deltas), retries before
the first byte with the service's ``Retry-After`` honoured, and every failure turned into an
``UpstreamError`` with the runtime's stable codes (``UPSTREAM_RATE_LIMITED``,
``_CLIENT_ERROR``, ``_SERVER_ERROR``, ``_TIMEOUT``, ``_UNREACHABLE``, ``_STREAM_CUT``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import ssl
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import orjson

from copilot_runtime.adapters.base import UpstreamError
from copilot_runtime.adapters.http1 import (
    Answer,
    AnswerCut,
    ConnectFailed,
    ConnectionPool,
    Endpoint,
    endpoint_for,
)

_DATA = b"data:"
# A ``data:`` line's payload, found in a read's whole lines at once: one call of the regular
# expression engine, cheaper than splitting the read into lines and testing each.
_DATA_LINE = re.compile(rb"^data:(.*)", re.MULTILINE)
# Retried before anything was streamed, as the model SDKs do: conflicts, rate limits,
# timeouts and server errors; never a client error.
_RETRIED_STATUSES = frozenset({408, 409, 429})
_MAX_RETRY_AFTER_SECONDS = 60.0

# Turns a failed response's status and JSON body into the service's own error message.
ErrorMessage = Callable[[int, Any], str | None]


def _retry_after(headers: Mapping[str, str]) -> float | None:
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def _message_from_body(body: Any) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        message = inner.get("message") if isinstance(inner, dict) else None
        if message:
            return str(message)
    return None


def status_error(status: int, headers: Mapping[str, str], raw_body: bytes) -> UpstreamError:
    try:
        body = orjson.loads(raw_body) if raw_body else None
    except orjson.JSONDecodeError:
        body = None
    message = _message_from_body(body) or raw_body.decode(errors="replace")[:500].strip()
    if status == 429:
        return UpstreamError(
            f"The model service is rate limiting requests: {message}",
            code="UPSTREAM_RATE_LIMITED",
            status_code=status,
            retry_after=_retry_after(headers),
        )
    return UpstreamError(
        f"The model service answered HTTP {status}: {message}",
        code="UPSTREAM_CLIENT_ERROR" if status < 500 else "UPSTREAM_SERVER_ERROR",
        status_code=status,
    )


STREAM_CUT_MESSAGE = "The model service closed the stream before it finished."
STREAM_CUT_CODE = "UPSTREAM_STREAM_CUT"


def stream_cut() -> UpstreamError:
    return UpstreamError(STREAM_CUT_MESSAGE, code=STREAM_CUT_CODE)


@contextlib.contextmanager
def upstream_stream_errors(*, item: str) -> Iterator[None]:
    """Around reading a model stream: a malformed ``item`` (chunk, event) or a cut stream
    becomes an ``UpstreamError`` with a stable code. The HTTP library raises its own errors
    (RemoteProtocolError...) when a stream is cut; the client gets the code, not their text.
    Cancellation (a ``BaseException``) passes through untouched."""
    try:
        yield
    except UpstreamError:
        raise
    except orjson.JSONDecodeError as exc:
        raise UpstreamError(
            f"The model service sent a malformed stream {item}.", code="UPSTREAM_BAD_STREAM"
        ) from exc
    except Exception as exc:
        raise stream_cut() from exc


def _backoff(attempt: int, error: UpstreamError | None) -> float:
    retry_after = error.retry_after if error is not None else None
    if retry_after is not None and 0 <= retry_after <= _MAX_RETRY_AFTER_SECONDS:
        return retry_after
    return min(0.5 * 2**attempt, 8.0) * (1 - 0.25 * random.random())


TIMEOUT_MESSAGE = "The model service did not answer in time."


def _timed_out() -> UpstreamError:
    return UpstreamError(TIMEOUT_MESSAGE, code="UPSTREAM_TIMEOUT")


def data_payloads(received: bytes) -> tuple[list[bytes], bytes]:
    """The payloads of the ``data:`` lines among ``received``'s whole lines (stripped), and
    what follows its last line break (a line still arriving)."""
    cut = received.rfind(b"\n") + 1
    return [payload.strip() for payload in _DATA_LINE.findall(received, 0, cut)], received[cut:]


class _SilenceWatch:
    """Fails an answer once a read has waited on it for ``seconds`` without a byte coming.

    One timer per stream, re-armed only when it falls due, not on every chunk received (a
    per-read timer, as aiohttp's read timeout was, is a visible share of the CPU of a stream
    paced token by token). Only the time a read spends waiting
    on the service counts (``Answer.waiting_since``), not the time the consumer takes between
    reads (the bytes it has not read yet are buffered).
    """

    def __init__(self, answer: Answer, seconds: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._answer = answer
        self._seconds = seconds
        self._handle = self._loop.call_at(self._loop.time() + seconds, self._check)

    def _check(self) -> None:
        since = self._answer.waiting_since
        now = self._loop.time()
        if since is not None and now - since >= self._seconds:
            # The read waiting on the answer raises it.
            self._answer.set_exception(TimeoutError(TIMEOUT_MESSAGE))
            return
        due = (since if since is not None else now) + self._seconds
        self._handle = self._loop.call_at(due, self._check)

    def stop(self) -> None:
        self._handle.cancel()


class SseTransport:
    """One service endpoint's streaming POSTs. Create it on the event loop that uses it.

    ``timeout`` bounds connecting, the wait for the answer's headers, and each silence of the
    service while its answer streams."""

    def __init__(
        self,
        *,
        headers: Mapping[str, str],
        timeout: float,
        max_retries: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._headers = {
            **headers,
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            # Nothing here decompresses: ask for the body as it is.
            "Accept-Encoding": "identity",
            "User-Agent": "copilot-runtime-django",
        }
        self._endpoints: dict[str, Endpoint] = {}
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._pool = ConnectionPool(ssl_context=ssl_context)

    def _endpoint(self, url: str) -> Endpoint:
        endpoint = self._endpoints.get(url)
        if endpoint is None:
            endpoint = self._endpoints[url] = endpoint_for(url, headers=self._headers)
        return endpoint

    async def _open(self, url: str, body: bytes) -> Answer:
        try:
            endpoint = self._endpoint(url)
        except ValueError as exc:
            # A setting's mistake (the base URL, a header): no retry can mend it.
            raise UpstreamError(
                f"The model service's request cannot be sent: {exc}", code="UPSTREAM_UNREACHABLE"
            ) from exc
        attempt = 0
        while True:
            error: UpstreamError
            try:
                async with asyncio.timeout(self._timeout):
                    answer = await self._pool.send(endpoint, body)
            except TimeoutError:
                error = _timed_out()
                retryable = True
            except ConnectFailed:
                error = UpstreamError(
                    "The model service could not be reached (connection failed).",
                    code="UPSTREAM_UNREACHABLE",
                )
                retryable = True
            else:
                if answer.status < 400:
                    encoding = answer.headers.get("content-encoding", "identity").strip().lower()
                    if encoding in ("identity", ""):
                        return answer
                    # Asked for as it is (Accept-Encoding: identity), sent compressed: nothing
                    # here decompresses, and reading it as text would lose the answer silently.
                    answer.release()
                    raise UpstreamError(
                        f"The model service sent a {encoding}-compressed answer, which the"
                        " runtime does not read.",
                        code="UPSTREAM_BAD_STREAM",
                    )
                try:
                    async with asyncio.timeout(self._timeout):
                        raw = await answer.read_all()
                except (AnswerCut, TimeoutError):
                    raw = b""
                finally:
                    answer.release()
                error = status_error(answer.status, answer.headers, raw)
                retryable = answer.status in _RETRIED_STATUSES or answer.status >= 500
            if not retryable or attempt >= self._max_retries:
                raise error
            await asyncio.sleep(_backoff(attempt, error))
            attempt += 1

    async def event_batches(
        self, url: str, payload: Mapping[str, Any]
    ) -> AsyncIterator[list[bytes]]:
        """The ``data:`` payloads of the streamed answer, as bytes (``[DONE]`` included),
        grouped as the reads of the socket delivered them: what arrived together can be
        handled together (the adapters join one read's text deltas)."""
        answer = await self._open(url, orjson.dumps(payload))
        pending = b""
        watch = _SilenceWatch(answer, self._timeout)
        try:
            # Lines of any length: one chunk of a large tool call's arguments can be long.
            while True:
                data = await answer.read()
                if not data:
                    break
                pending += data
                if b"\n" not in data:
                    continue
                batch, pending = data_payloads(pending)
                if batch:
                    yield batch
            if pending.startswith(_DATA):
                yield [pending[5:].strip()]
        except TimeoutError as exc:
            raise _timed_out() from exc
        except AnswerCut as exc:
            raise stream_cut() from exc
        finally:
            watch.stop()
            # Read to its end, the connection is reused. Stopped early (the run was cancelled,
            # or a consumer stopped reading), it is dropped, so the service stops generating.
            answer.release()

    async def aclose(self) -> None:
        await self._pool.aclose()
