"""The v2 REST routes under ``/api/copilotkit`` and the HTTP methods each accepts.

Matched as the TypeScript runtime does (``fetch-router.ts``): path segments decoded one by one,
an undecodable segment matching nothing; a wrong method is a 405 with ``Allow``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

INFO = "info"
AGENT_RUN = "agent/run"
AGENT_CONNECT = "agent/connect"
AGENT_STOP = "agent/stop"
AGENT_SUGGEST = "agent/suggest"
THREADS_LIST = "threads/list"
THREAD_MESSAGES = "threads/messages"
THREAD_STATE = "threads/state"
THREAD_EVENTS = "threads/events"
THREAD_ARCHIVE = "threads/archive"
THREAD_UPDATE = "threads/update"  # PATCH renames/archives, DELETE deletes

_ALLOWED_METHODS: dict[str, tuple[str, ...]] = {
    INFO: ("GET",),
    THREADS_LIST: ("GET",),
    THREAD_MESSAGES: ("GET",),
    THREAD_STATE: ("GET",),
    THREAD_EVENTS: ("GET",),
    THREAD_UPDATE: ("PATCH", "DELETE"),
}
_POST_ONLY = ("POST",)

_AGENT_ACTIONS = {"run": AGENT_RUN, "connect": AGENT_CONNECT, "suggest": AGENT_SUGGEST}
_THREAD_READS = {"messages": THREAD_MESSAGES, "state": THREAD_STATE, "events": THREAD_EVENTS}


@dataclass(frozen=True)
class Route:
    method: str
    agent_id: str | None = None
    thread_id: str | None = None

    @property
    def allowed_methods(self) -> tuple[str, ...]:
        return _ALLOWED_METHODS.get(self.method, _POST_ONLY)


def _decode(segment: str) -> str | None:
    try:
        decoded = unquote(segment, errors="strict")
    except UnicodeDecodeError:
        return None
    return decoded or None


def match_route(subpath: str) -> Route | None:
    """The route of a path below ``/api/copilotkit/`` (already percent-decoded by Django
    except for ``%2F``-style segments, which are decoded here), or None."""
    segments = [segment for segment in subpath.split("/") if segment]
    match segments:
        case ["info"]:
            return Route(INFO)
        case ["agent", agent_id, action] if action in _AGENT_ACTIONS:
            decoded = _decode(agent_id)
            return Route(_AGENT_ACTIONS[action], agent_id=decoded) if decoded else None
        case ["agent", agent_id, "stop", thread_id]:
            agent, thread = _decode(agent_id), _decode(thread_id)
            return Route(AGENT_STOP, agent_id=agent, thread_id=thread) if agent and thread else None
        case ["threads"]:
            return Route(THREADS_LIST)
        case ["threads", thread_id, "archive"]:
            decoded = _decode(thread_id)
            return Route(THREAD_ARCHIVE, thread_id=decoded) if decoded else None
        case ["threads", thread_id, read] if read in _THREAD_READS:
            decoded = _decode(thread_id)
            return Route(_THREAD_READS[read], thread_id=decoded) if decoded else None
        case ["threads", thread_id]:
            decoded = _decode(thread_id)
            return Route(THREAD_UPDATE, thread_id=decoded) if decoded else None
    return None
