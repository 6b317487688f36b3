"""Where the server's time goes, from ``py-spy record --format raw [--native]`` output.

Each input line is one sampled stack, root first, frames separated by ``;``, then a count:
``<module> (app.py:3);handler (views.py:10);loads (json/__init__.py:346) 7``. Python frames
name their file (``path.py:line``), native frames their library (``malloc (libc.so.6)``).

Three views:

- **by component**: each sample goes to the component (JSON, ORM/DB, upstream HTTP client,
  GraphQL library, wire encoding, the runtime's own code, Django request handling, the asgiref
  sync/async bridge, asyncio/daphne/twisted) of its deepest frame that has one, looking
  through plumbing (asyncio, threads, selectors): an httpx read that bottoms out in asyncio
  counts as upstream HTTP, asyncio work the runtime itself asks for (queues, tasks) as runtime
  code, and the event loop's own time as asyncio/daphne/twisted;
- **by own time**: the deepest frame that is Python or a native extension (CPython's and libc's
  internals are folded into the Python function that called them);
- **by inclusive time**: every Python function on the stack, once per sample.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_FRAME = re.compile(r"^(?P<function>.*) \((?P<location>[^()]*)\)$")
_PYTHON_LOCATION = re.compile(r"^(?P<file>.+\.py):(?P<line>\d+)$")
# Native code that is the interpreter or the C library, never a component of its own.
_CORE_NATIVE = ("libpython", "libc.so", "libc-", "ld-linux", "[vdso]", "libpthread", "libm.so")

# Components in the order they are tried on one frame: (name, Python file prefixes, native
# library substrings).
COMPONENTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("JSON encode/decode (json, orjson)", ("json/",), ("orjson", "_json")),
    (
        "ORM / database (django.db, psycopg, libpq)",
        ("django/db/", "psycopg/", "psycopg_binary/"),
        ("libpq", "psycopg"),
    ),
    (
        "upstream HTTP client (openai, httpx, httpcore, anyio, h11)",
        (
            "openai/",
            "httpx/",
            "httpx2/",
            "httpcore/",
            "httpcore2/",
            "anyio/",
            "h11/",
            "sniffio/",
            "aiohttp/",
        ),
        (),
    ),
    ("GraphQL library (graphql-core, strawberry)", ("graphql/", "strawberry/"), ()),
    (
        "wire encoding (transport.py, fastpath/encoder.py)",
        ("copilot_runtime/graphql/transport.py", "copilot_runtime/graphql/fastpath/encoder.py"),
        (),
    ),
    (
        "runtime code (copilot_runtime, conversations, agents)",
        ("copilot_runtime/", "conversations/", "agents/"),
        (),
    ),
    (
        "Django request/response handling (handlers, middleware)",
        ("django/", "whitenoise/", "corsheaders/", "channels/"),
        (),
    ),
    (
        "sync/async bridge (asgiref, thread pool)",
        ("asgiref/", "concurrent/futures/", "threading.py"),
        (),
    ),
    (
        "asyncio / daphne / twisted",
        ("asyncio/", "twisted/", "daphne/", "autobahn/", "selectors.py", "socket.py", "ssl.py"),
        (),
    ),
)
# Plumbing every component goes through: skipped while looking for the component that asked
# for the work (an httpx read ending in asyncio is the upstream client's), used only when
# nothing else is on the stack.
TRANSPARENT = ("asyncio/", "concurrent/futures/", "threading.py", "selectors.py", "socket.py")
GC_COMPONENT = "garbage collector"
OTHER_COMPONENT = "other"
_GC_FUNCTIONS = ("gc_collect", "collect_generations")


@dataclass(frozen=True)
class Frame:
    function: str
    location: str  # "path.py:123" for Python, the library for native frames

    @property
    def is_python(self) -> bool:
        return _PYTHON_LOCATION.match(self.location) is not None

    @property
    def file(self) -> str:
        match = _PYTHON_LOCATION.match(self.location)
        return match.group("file") if match else self.location

    @property
    def is_core_native(self) -> bool:
        return not self.is_python and (
            self.location.startswith(_CORE_NATIVE) or self.function.startswith("0x")
        )

    def label(self) -> str:
        return f"{self.function} ({self.file})"


def parse_frame(raw: str) -> Frame:
    match = _FRAME.match(raw.strip())
    if match is None:
        return Frame(function=raw.strip(), location="")
    return Frame(function=match.group("function"), location=match.group("location"))


def parse_collapsed(lines: Iterable[str]) -> list[tuple[tuple[Frame, ...], int]]:
    """``(stack root->leaf, count)`` per non-empty line."""
    stacks = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        stack_text, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        frames = tuple(parse_frame(raw) for raw in stack_text.split(";") if raw)
        stacks.append((frames, int(count_text)))
    return stacks


def _component(frame: Frame) -> str | None:
    if frame.is_python:
        file = frame.file
        for name, prefixes, _ in COMPONENTS:
            if file.startswith(prefixes):
                return name
        return None
    for name, _, libraries in COMPONENTS:
        if any(library in frame.location for library in libraries):
            return name
    return None


def _is_transparent(frame: Frame) -> bool:
    return frame.is_python and frame.file.startswith(TRANSPARENT)


def component_of(stack: tuple[Frame, ...]) -> str:
    """The component of the deepest non-plumbing frame that has one (see the module doc)."""
    for frame in reversed(stack):
        if frame.is_core_native:
            if frame.function.startswith(_GC_FUNCTIONS):
                return GC_COMPONENT
            continue
        if _is_transparent(frame):
            continue
        component = _component(frame)
        if component is not None:
            return component
    for frame in reversed(stack):
        component = _component(frame)
        if component is not None:
            return component
    return OTHER_COMPONENT


def own_frame(stack: tuple[Frame, ...]) -> Frame | None:
    for frame in reversed(stack):
        if frame.is_python or not frame.is_core_native:
            return frame
    return stack[-1] if stack else None


@dataclass(frozen=True)
class Share:
    name: str
    samples: int
    percent: float


@dataclass(frozen=True)
class ProfileBreakdown:
    total_samples: int
    by_component: list[Share]
    by_own_time: list[Share]
    by_inclusive_time: list[Share]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _shares(counter: Counter[str], total: int, limit: int | None) -> list[Share]:
    return [
        Share(name=name, samples=samples, percent=round(100 * samples / total, 1) if total else 0)
        for name, samples in counter.most_common(limit)
    ]


def summarize(
    stacks: list[tuple[tuple[Frame, ...], int]], *, top: int = 30, top_inclusive: int = 25
) -> ProfileBreakdown:
    components: Counter[str] = Counter()
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for stack, count in stacks:
        total += count
        components[component_of(stack)] += count
        frame = own_frame(stack)
        if frame is not None:
            own[frame.label()] += count
        for label in {frame.label() for frame in stack if frame.is_python}:
            inclusive[label] += count
    return ProfileBreakdown(
        total_samples=total,
        by_component=_shares(components, total, None),
        by_own_time=_shares(own, total, top),
        by_inclusive_time=_shares(inclusive, total, top_inclusive),
    )


def summarize_file(path: Path, *, top: int = 30) -> ProfileBreakdown:
    with path.open(encoding="utf-8", errors="replace") as lines:
        return summarize(parse_collapsed(lines), top=top)


def render(breakdown: ProfileBreakdown, *, heading: str = "py-spy samples") -> str:
    lines = [f"{heading}: {breakdown.total_samples}", ""]
    for title, shares in (
        ("By component", breakdown.by_component),
        ("Top functions by own time", breakdown.by_own_time),
        ("Top functions by inclusive time", breakdown.by_inclusive_time),
    ):
        lines.append(title)
        lines.extend(
            f"  {share.percent:5.1f}%  {share.samples:7d}  {share.name}" for share in shares
        )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    import sys

    for argument in sys.argv[1:]:
        print(render(summarize_file(Path(argument))))


if __name__ == "__main__":
    main()
