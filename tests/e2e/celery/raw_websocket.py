"""A tiny websocket client (RFC 6455 over asyncio streams) speaking graphql-transport-ws.

Enough to run one subscription against a served daphne from a test: no extensions, text
frames only, fragmented server messages reassembled, pings answered.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
from typing import Any
from urllib.parse import urlsplit

GRAPHQL_TRANSPORT_WS = "graphql-transport-ws"
_TEXT, _CLOSE, _PING, _PONG, _CONTINUATION = 0x1, 0x8, 0x9, 0xA, 0x0


class WebSocketClosed(Exception):
    """The server closed the connection before the subscription completed."""


class _Socket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def send(self, message: dict[str, Any], opcode: int = _TEXT) -> None:
        await self._send_frame(json.dumps(message).encode(), opcode)

    async def _send_frame(self, payload: bytes, opcode: int) -> None:
        mask = os.urandom(4)  # a client masks every frame
        length = len(payload)
        if length < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
        elif length < 1 << 16:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
        self._writer.write(header + mask + masked)
        await self._writer.drain()

    async def receive(self) -> dict[str, Any]:
        message = b""
        while True:
            first, second = await self._reader.readexactly(2)
            fin, opcode, length = first & 0x80, first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", await self._reader.readexactly(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", await self._reader.readexactly(8))
            payload = await self._reader.readexactly(length)
            if opcode == _PING:
                await self._send_frame(payload, _PONG)
                continue
            if opcode == _CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise WebSocketClosed(f"closed by the server (code {code}): {payload[2:]!r}")
            if opcode in (_TEXT, _CONTINUATION):
                message += payload
                if fin:
                    return json.loads(message)

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()


async def _connect(url: str, path: str) -> _Socket:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Protocol: {GRAPHQL_TRANSPORT_WS}\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0]
    if b" 101 " not in status_line:
        writer.close()
        raise WebSocketClosed(f"the handshake was refused: {head!r}")
    return _Socket(reader, writer)


async def subscribe(
    url: str,
    query: str,
    variables: dict[str, Any],
    *,
    path: str = "/api/copilotkit",
    limit_seconds: float = 30,
) -> list[dict[str, Any]]:
    """Run one subscription to its end; the ``payload`` of every ``next`` message, in order.
    A GraphQL ``error`` message raises ``AssertionError`` with its errors."""
    socket = await _connect(url, path)
    try:
        async with asyncio.timeout(limit_seconds):
            await socket.send({"type": "connection_init", "payload": {}})
            acknowledged = await socket.receive()
            if acknowledged.get("type") != "connection_ack":
                raise AssertionError(f"no connection_ack: {acknowledged}")
            await socket.send(
                {
                    "id": "1",
                    "type": "subscribe",
                    "payload": {"query": query, "variables": variables},
                }
            )
            payloads = []
            while True:
                message = await socket.receive()
                kind = message.get("type")
                if kind == "next":
                    payloads.append(message["payload"])
                elif kind == "complete":
                    return payloads
                elif kind == "error":
                    raise AssertionError(f"the subscription failed: {message.get('payload')}")
                elif kind == "ping":
                    await socket.send({"type": "pong"})
    finally:
        await socket.close()
