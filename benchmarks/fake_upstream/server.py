"""The asyncio HTTP/1.1 server: connections, routing, chat completions, Anthropic's Messages API
(messages_api.py) and control endpoints."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from benchmarks.fake_upstream import http1
from benchmarks.fake_upstream.directives import Directive, DirectiveError, parse_directive
from benchmarks.fake_upstream.messages_api import (
    MESSAGES_PATH,
    chat_shaped,
    send_messages_reply,
)
from benchmarks.fake_upstream.messages_api import error_body as messages_error_body
from benchmarks.fake_upstream.messages_stop import apply_stops
from benchmarks.fake_upstream.payloads import error_body
from benchmarks.fake_upstream.plan import ReplyPlan, build_plan, chat_messages, find_directive
from benchmarks.fake_upstream.responder import Outcome, ReplyIdentity, send_reply
from benchmarks.fake_upstream.state import FakeState
from benchmarks.fake_upstream.thinking import invalid_thinking, thinking_enabled

CHAT_PATH = "/chat/completions"
CONTROL_PREFIX = "/_fake/"
# Request heads (not bodies) larger than this are refused.
_HEAD_LIMIT = 1024 * 1024

_ControlHandler = Callable[[bytes], Awaitable[tuple[int, object]]]


class FakeUpstreamServer:
    """Serves the fake on one event loop; `FakeUpstream` wraps it in a thread for tests."""

    def __init__(
        self,
        *,
        state: FakeState,
        host: str = "127.0.0.1",
        port: int = 0,
        token_delay_ms: float = 0.0,
    ) -> None:
        self.state = state
        self.host = host
        self.token_delay_ms = token_delay_ms
        self._requested_port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._control: dict[tuple[str, str], _ControlHandler] = {
            ("POST", "script"): self._control_script,
            ("POST", "reset"): self._control_reset,
            ("GET", "requests"): self._control_requests,
            ("GET", "stats"): self._control_stats,
            ("GET", "health"): self._control_health,
        }

    async def start(self) -> int:
        """Start listening; returns the bound port (useful with port 0)."""
        self._server = await asyncio.start_server(
            self._serve_connection, self.host, self._requested_port, limit=_HEAD_LIMIT
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Python 3.11's wait_closed does not wait for (or end) open connections: do it here.
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while await self._serve_one_request(reader, writer):
                pass
        except (http1.BadRequest, ConnectionError):
            pass  # nothing sensible can be answered on this connection any more
        except asyncio.CancelledError:
            # Only close() cancels connections. Ending normally matters: Python 3.11's stream
            # callback logs a spurious traceback for a connection task that ends cancelled.
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _serve_one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; returns whether the connection stays open for another."""
        request = await http1.read_request(reader)
        if request is None:
            return False
        path = request.path.removeprefix("/v1") if request.path.startswith("/v1/") else request.path
        # Any path ending in /chat/completions: Azure's deployment URLs reach it too.
        if path.endswith(CHAT_PATH) and request.method == "POST":
            return await self._chat(request, reader, writer)
        if path == MESSAGES_PATH and request.method == "POST":
            return await self._messages(request, reader, writer)
        if path.startswith(CONTROL_PREFIX):
            handler = self._control.get((request.method, path.removeprefix(CONTROL_PREFIX)))
            if handler is not None:
                status, payload = await handler(request.body)
                return await _respond_json(writer, request, status, payload)
        not_found = error_body(
            message=f"No route for {request.method} {request.path}",
            status=404,
            type_=None,
            code="not_found",
        )
        return await _respond_json(writer, request, 404, not_found)

    async def _chat(
        self,
        request: http1.HttpRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        async def send(plan: ReplyPlan, body: dict[str, Any], number: int) -> Outcome:
            stream_options = body.get("stream_options")
            include_usage = isinstance(stream_options, Mapping) and bool(
                stream_options.get("include_usage")
            )
            return await send_reply(
                plan=plan,
                identity=ReplyIdentity.now(
                    completion_id=f"chatcmpl-fake-{number}", model=_model(body)
                ),
                stream=body.get("stream") is True,
                include_usage=include_usage,
                reader=reader,
                writer=writer,
                keep_alive=request.keep_alive,
            )

        return await self._reply(
            request,
            invalid=lambda message: _respond_invalid(writer, request, message),
            conversation=lambda body: body,
            send=send,
        )

    async def _messages(
        self,
        request: http1.HttpRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Anthropic's Messages API (messages_api.py), from the same directives."""

        async def send(plan: ReplyPlan, body: dict[str, Any], number: int) -> Outcome:
            plan, stop = apply_stops(plan, body)
            return await send_messages_reply(
                plan=plan,
                stop=stop,
                message_id=f"msg_fake_{number}",
                model=_model(body),
                stream=body.get("stream") is True,
                reader=reader,
                writer=writer,
                keep_alive=request.keep_alive,
                thinking=thinking_enabled(body),
                refused=invalid_thinking(body),
            )

        return await self._reply(
            request,
            invalid=lambda message: _messages_invalid(writer, request, message),
            conversation=lambda body: {"messages": chat_shaped(body)},
            send=send,
        )

    async def _reply(
        self,
        request: http1.HttpRequest,
        *,
        invalid: Callable[[str], Awaitable[bool]],
        conversation: Callable[[dict[str, Any]], Mapping[str, Any]],
        send: Callable[[ReplyPlan, dict[str, Any], int], Awaitable[Outcome]],
    ) -> bool:
        """One model call of either API: the body read, the directive found (queued, else in
        ``conversation``, the body in chat-completions shape), the reply sent and counted."""
        try:
            body = orjson.loads(request.body)
        except orjson.JSONDecodeError as error:
            return await invalid(f"Request body is not JSON: {error}")
        if not isinstance(body, dict):
            return await invalid("Request body must be a JSON object")
        number = self.state.record_request(body)
        shaped = conversation(body)
        try:
            # A queued directive wins over one written in the conversation.
            directive = self.state.next_directive() or find_directive(chat_messages(shaped))
        except DirectiveError as error:
            return await invalid(f"Invalid FAKE directive: {error}")
        plan = build_plan(
            body=shaped,
            directive=directive,
            request_number=number,
            default_token_delay_ms=self.token_delay_ms,
        )
        self.state.count("active")
        try:
            outcome = await send(plan, body, number)
        finally:
            self.state.count("active", -1)
        self.state.count(outcome.value)
        if plan.error is not None and outcome is Outcome.COMPLETED:
            self.state.count("errors")
        return outcome is Outcome.COMPLETED and request.keep_alive

    async def _control_script(self, raw: bytes) -> tuple[int, object]:
        try:
            payload = orjson.loads(raw or b"{}")
            responses = payload.get("responses") if isinstance(payload, dict) else None
            if not isinstance(responses, list):
                raise DirectiveError('expected {"responses": [<directive>, ...]}')
            directives: list[Directive] = [parse_directive(item) for item in responses]
        except (orjson.JSONDecodeError, DirectiveError) as error:
            return 400, error_body(message=str(error), status=400, type_=None, code=None)
        return 200, {"queued": self.state.enqueue(directives)}

    async def _control_reset(self, _raw: bytes) -> tuple[int, object]:
        self.state.reset()
        return 200, {"ok": True}

    async def _control_requests(self, _raw: bytes) -> tuple[int, object]:
        return 200, self.state.requests()

    async def _control_stats(self, _raw: bytes) -> tuple[int, object]:
        return 200, self.state.stats()

    async def _control_health(self, _raw: bytes) -> tuple[int, object]:
        return 200, {"ok": True}


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) and model else "fake-model"


async def _respond_invalid(
    writer: asyncio.StreamWriter, request: http1.HttpRequest, message: str
) -> bool:
    payload = error_body(message=message, status=400, type_=None, code="invalid_fake_request")
    return await _respond_json(writer, request, 400, payload)


async def _messages_invalid(
    writer: asyncio.StreamWriter, request: http1.HttpRequest, message: str
) -> bool:
    """A bad Messages request, answered in Anthropic's error shape."""
    payload = messages_error_body(400, message, "invalid_request_error")
    return await _respond_json(writer, request, 400, payload)


async def _respond_json(
    writer: asyncio.StreamWriter, request: http1.HttpRequest, status: int, payload: Any
) -> bool:
    writer.write(http1.json_response(status, payload, keep_alive=request.keep_alive))
    await writer.drain()
    return request.keep_alive
