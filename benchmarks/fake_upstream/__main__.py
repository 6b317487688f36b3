"""`python -m benchmarks.fake_upstream --host 127.0.0.1 --port 0 [--token-delay-ms X]`.

Prints exactly one line, `FAKE_UPSTREAM_PORT=<port>`, once listening, then serves until
SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from benchmarks.fake_upstream.server import FakeUpstreamServer
from benchmarks.fake_upstream.state import DEFAULT_MAX_RECORDED_REQUESTS, FakeState


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    asyncio.run(
        _serve(
            host=arguments.host,
            port=arguments.port,
            token_delay_ms=arguments.token_delay_ms,
            max_recorded_requests=arguments.max_recorded_requests,
        )
    )
    return 0


async def _serve(
    *, host: str, port: int, token_delay_ms: float, max_recorded_requests: int
) -> None:
    server = FakeUpstreamServer(
        state=FakeState(max_recorded_requests=max_recorded_requests),
        host=host,
        port=port,
        token_delay_ms=token_delay_ms,
    )
    bound_port = await server.start()
    stop_requested = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stop_requested.set)
    sys.stdout.write(f"FAKE_UPSTREAM_PORT={bound_port}\n")
    sys.stdout.flush()
    try:
        await stop_requested.wait()
    finally:
        await server.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fake_upstream",
        description="Deterministic OpenAI-compatible fake upstream.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--token-delay-ms", type=float, default=0.0, help="default delay before each token"
    )
    parser.add_argument(
        "--max-recorded-requests",
        type=int,
        default=DEFAULT_MAX_RECORDED_REQUESTS,
        help="request bodies kept for GET /_fake/requests (oldest dropped first)",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
