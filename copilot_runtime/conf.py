"""The runtime's own configuration: one ``COPILOT_RUNTIME`` dict with defaults.

The apps (``conversations``, ``agents`` and the engine packages) read every product setting
through :func:`runtime_setting`, never from the project's settings module directly, so they
can be installed into an existing Django project. Any key may be overridden from the
environment as ``COPILOT_RUNTIME_<KEY>``: JSON values are parsed (``true``, ``10``,
``["a"]``), list-typed settings also accept a comma-separated string, anything else is kept
as a string.
"""

from __future__ import annotations

import json
import math
import os
from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from copilot_runtime.history import DEFAULT_SIZE, HISTORIES

DEFAULTS: dict[str, Any] = {
    # Who may call the runtime without a session or a bearer token. None: only while DEBUG is
    # on (anonymous callers could otherwise spend the project's model budget).
    "ALLOW_ANONYMOUS": None,
    # Where the runtime is mounted (copilot_runtime/mount.py; include copilot_runtime.urls there).
    "PATH": "/api/copilotkit",
    # The fast lane (copilot_runtime/fastlane): the worker's and the channel layer's uses of
    # kombu's, Celery's, channels_redis's, redis-py's and strawberry's private names, each
    # taken only with a library version the suite has tested. False: the public API only.
    "FAST_LANE": True,
    # Browser origins served cross-origin (CORS) and trusted for cookie-authenticated POSTs.
    "CORS_ALLOWED_ORIGINS": [],
    # While DEBUG is on, loopback origins on any port are allowed too (a React dev server on
    # localhost:3000 against the runtime on :8000 works with no setting).
    "CORS_LOOPBACK_IN_DEBUG": True,
    # Requests larger than this are refused with 413.
    "MAX_BODY_BYTES": 10 * 1024 * 1024,
    # Images and documents in v2 user messages (copilot_runtime/agui/media.py), decoded bytes:
    # per part (5 MiB, the largest image Anthropic takes), and per request for the new turn's
    # parts only (the re-sent history is not counted again). 0: no bound.
    "MAX_MEDIA_PART_BYTES": 5 * 1024 * 1024,
    "MAX_MEDIA_REQUEST_BYTES": 7 * 1024 * 1024,
    # Websockets (copilot_runtime/ws/limits.py). One that sends no connection_init within
    # this long is closed with 4408 (clients send it as soon as the socket opens).
    "WEBSOCKET_INIT_TIMEOUT_SECONDS": 5.0,
    # Per process: open websockets, and those of them not yet past connection_init (anyone
    # can open those); a socket over either bound is closed at once with 4503 and the reason,
    # which clients retry. Each open socket holds a file descriptor: keep the process's
    # limit (ulimit -n) above WEBSOCKET_MAX_CONNECTIONS. 0: no bound.
    "WEBSOCKET_MAX_CONNECTIONS": 2000,
    "WEBSOCKET_MAX_PENDING_INIT": 100,
    # Agents besides ``default``: {name: {"description": ..., "kind": ..., ...}}. Kinds (see
    # agents/runners): ``python`` ({"class": "dotted.PythonAgent"}), ``llm`` ({"instructions",
    # "model", "tools": [server action names], "frontend_actions": True}), ``remote``
    # ({"endpoint": a REMOTE_ENDPOINTS name, "agent": its name there}) and ``agui`` ({"url",
    # "headers", "timeout_seconds"}).
    "AGENTS": {},
    # CopilotKit remote endpoints (the ``copilotkit`` Python SDK's protocol): a list of
    # {"name", "url", "headers": {...} or "dotted.path.to.hook", "timeout_seconds",
    # "offer_actions": True}. Their actions are offered to the chat engine as server actions.
    "REMOTE_ENDPOINTS": [],
    # LangGraph Platform deployments whose assistants are agents (kind ``langgraph``, see
    # agents/langgraph_platform/config.py): [{"url", "api_key", "agents": [...] or omitted}].
    "LANGGRAPH_DEPLOYMENTS": [],
    # How long an endpoint's POST /info answer is reused (per endpoint and properties).
    "REMOTE_INFO_TTL_SECONDS": 5.0,
    # Calls to remote endpoints and AG-UI agents: retries on 408/429/502/503/504 and connection
    # errors, waiting BASE * 2**n seconds capped at MAX; the connect timeout; the longest silence
    # tolerated while reading (an agent's own ``timeout_seconds`` overrides it).
    "REMOTE_RETRIES": 3,
    "REMOTE_RETRY_BASE_SECONDS": 1.0,
    "REMOTE_RETRY_MAX_SECONDS": 5.0,
    "REMOTE_CONNECT_TIMEOUT_SECONDS": 5.0,
    "REMOTE_READ_TIMEOUT_SECONDS": 120.0,
    # Server-side actions: dotted paths of callables or of action specs.
    "ACTIONS": [],
    # Cap on model calls in one turn's tool loop.
    "MAX_ITERATIONS": 10,
    # Loop policy for every agent (see copilot_runtime/engine/loop_policy.py); agents may
    # override it with their own "loop" dict.
    "LOOP": {},
    # Server actions the loop never runs before the client approved the call.
    "APPROVAL_REQUIRED_ACTIONS": [],
    # Circuit breakers: consecutive failures of one call (same arguments) before the model is
    # told to stop; consecutive assistant turns of empty tool calls before the run ends.
    "TOOL_FAILURE_LIMIT": 3,
    "EMPTY_TOOL_CALL_LIMIT": 6,
    # ``inline`` (in-process asyncio task) or ``celery`` (needs a broker).
    "EXECUTOR": "inline",
    # A run on a worker is stopped after this long (Celery soft limit; hard limit + 30 s).
    "RUN_TIME_LIMIT_SECONDS": 600.0,
    # What a dropped connection does to its run, per protocol surface: ``cancel`` or
    # ``continue``. The v1 HTTP stream's only stop signal is the abort, so it cancels; websocket
    # subscriptions and v2 have explicit stops, so their runs finish and persist.
    "ON_DISCONNECT": {"graphql": "cancel", "subscription": "continue", "agui": "continue"},
    # A second request on a running thread: ``reject`` (THREAD_BUSY).
    "THREAD_BUSY_POLICY": "reject",
    # Dotted paths of middleware hooks, or None.
    "ON_BEFORE_REQUEST": None,
    "ON_AFTER_REQUEST": None,
    # The model service: a dict with its ``kind`` (openai, azure, anthropic, langchain, demo,
    # none) and that kind's options (copilot_runtime/adapters/kinds.py); an agent may have its
    # own (``AGENTS[name]["adapter"]``). None: ``MODEL_ADAPTER`` and the OPENAI_* settings below
    # decide (``auto`` picks ``openai`` when an API key is configured, else ``demo``).
    "ADAPTER": None,
    "MODEL_ADAPTER": "auto",
    "OPENAI_API_KEY": "",
    "OPENAI_BASE_URL": "",
    "OPENAI_MODEL": "gpt-4o-mini",
    "OPENAI_TIMEOUT_SECONDS": 60.0,
    "OPENAI_MAX_RETRIES": 2,
    # The role instructions are sent with: ``developer`` (what OpenAI's own API prefers, and what
    # the TypeScript runtime sends), ``system`` (what vLLM, Ollama and older Azure deployments
    # accept), or ``auto``: ``developer`` for api.openai.com, ``system`` for any other base URL.
    "OPENAI_SYSTEM_ROLE": "auto",
    # Event log batching: flush coalesced deltas after this many milliseconds while another
    # process relays the run (Celery), and after INLINE_EVENT_FLUSH_MS while the process
    # executing it streams it itself (the log is then only read by clients that re-attach).
    "EVENT_FLUSH_MS": 30,
    "INLINE_EVENT_FLUSH_MS": 250,
    # The turn's storage path (conversations/store): ``auto`` is raw SQL on PostgreSQL's async
    # pool and the ORM on one writer thread elsewhere; ``orm`` forces the ORM everywhere.
    "TURN_STORE": "auto",
    # The hot endpoints remember a bearer token's or a session's user this long (seconds): a
    # revoked token or a logged-out session is refused once it has passed.
    "AUTH_CACHE_SECONDS": 2.0,
    # Serve the two hot endpoints through Django's handler and the project's whole MIDDLEWARE
    # instead of the runtime's front (copilot_runtime/endpoints/host_middleware.py says what the
    # front honours): for a project whose own middleware must see every request.
    "HOT_PATHS_THROUGH_DJANGO": False,
    # History messages a process remembers, every thread and both protocols together
    # (copilot_runtime/history: their bytes and what was made of them, so a history re-sent
    # with every turn is not read, checked and converted again): 3-5 MiB at the default, about
    # the live history of 50 forty-turn conversations. A process serving more conversations
    # at once re-reads their history on every turn unless this grows with them; 0 remembers
    # nothing.
    "REMEMBERED_MESSAGES": DEFAULT_SIZE,
    # PostgreSQL connections of the turn's storage path (per process and event loop): they
    # bound concurrent statements, not concurrent conversations (none is held while a model
    # streams). A request waits at most DATABASE_WAIT_SECONDS for one, then gets the
    # protocol's own "database unavailable" error.
    "DATABASE_ASYNC_POOL_MAX": 10,
    "DATABASE_WAIT_SECONDS": 10.0,
    # The process executing a run renews its heartbeat this often; a run whose heartbeat is
    # older than RUN_STALE_SECONDS is failed (its executor died).
    # Three missed heartbeats and a margin: a dead worker's client is told within ~7 s, a
    # worker merely paused (a long GC, a busy loop) for a few seconds is not declared dead.
    "HEARTBEAT_SECONDS": 2.0,
    "RUN_STALE_SECONDS": 6.5,
    # A run no worker started within this long is failed with RUN_NOT_STARTED (Celery only:
    # an inline run starts at once).
    "PENDING_TIMEOUT_SECONDS": 30.0,
    # Guardrails (copilot_runtime/guardrails): rules from the admin and the request's own
    # cloud.guardrails lists, checked on the last user message. Off: no rule is even looked up.
    "GUARDRAILS_ENABLED": True,
    # ``blocking``: checked before the model runs (a denial costs no model call); ``parallel``:
    # checked while the model streams (lower latency; a denial stops the model and fails the
    # streaming message; server actions wait for the verdict either way).
    "GUARDRAILS_MODE": "blocking",
    # An evaluator that errors or times out: ``closed`` refuses the message, ``open`` lets it
    # through; the reason is recorded either way.
    "GUARDRAILS_FAIL": "closed",
    # Who checks topic rules (pattern rules are always checked locally): ``local`` (keywords),
    # ``model`` (a classifier call on the configured model, counted in the run's usage),
    # ``cloud`` (Copilot Cloud's /guardrails/validate), or ``auto``: cloud when a public API key
    # is configured (or the request asks for cloud guardrails and sends its key), else the model
    # unless it is the offline demo model, else local.
    "GUARDRAILS_EVALUATOR": "auto",
    # How long the model classifier, Copilot Cloud, or a pattern match too large for the event
    # loop (run on the guardrails' threads) may take before it counts as failed.
    "GUARDRAILS_TIMEOUT_SECONDS": 10.0,
    # The classifier's model; blank: the configured model (OPENAI_MODEL).
    "GUARDRAILS_MODEL": "",
    # Copilot Cloud: the public API key (else the request's X-CopilotCloud-Public-API-Key
    # header), and the API's base URL.
    "COPILOT_CLOUD_PUBLIC_API_KEY": "",
    "COPILOT_CLOUD_BASE_URL": "https://api.cloud.copilotkit.ai",
    # Tracing (copilot_runtime/tracing): every run's spans are stored with it (the cost of its
    # model calls is recorded either way). Prompt and completion content (tool arguments and
    # results too) is kept in spans only with TRACE_CONTENT on: it may be sensitive. Off here,
    # for a host project; the standalone site turns it on unless ENVIRONMENT=production.
    # OTEL_EXPORTER_OTLP_ENDPOINT (with the ``otel`` extra installed) also exports the spans.
    "TRACING": True,
    "TRACE_CONTENT": False,
    # A dotted path to a callable applied to every piece of content (a JSON value) before it
    # is kept, hashed or exported: it returns what may be stored (e.g. with secrets masked).
    "TRACE_CONTENT_REDACT": "",
    # ``manage.py purge_traces`` deletes run events and spans older than this many days
    # (messages and agent states are kept).
    "TRACE_RETENTION_DAYS": 30,
}

ENV_PREFIX = "COPILOT_RUNTIME_"


# Settings that are true/false though their default (None) says nothing of their type.
BOOLEAN_KEYS = frozenset({"ALLOW_ANONYMOUS"})


def parse_env_value(raw: str, default: Any, key: str = "") -> Any:
    """An environment value in the type of the setting's default."""
    if isinstance(default, bool) or key in BOOLEAN_KEYS:
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    if isinstance(default, str):
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if isinstance(default, list) and isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(default, int | float) and isinstance(value, str):
        raise ValueError(f"{ENV_PREFIX}* expects a number, got {raw!r}")
    return value


@cache
def runtime_settings() -> dict[str, Any]:
    """All runtime settings: defaults, then the project's dict, then the environment."""
    merged = dict(DEFAULTS)
    merged.update(getattr(settings, "COPILOT_RUNTIME", {}) or {})
    for name, raw in os.environ.items():
        if name.startswith(ENV_PREFIX):
            key = name[len(ENV_PREFIX) :]
            merged[key] = parse_env_value(raw, merged.get(key), key)
    return merged


def runtime_setting(key: str) -> Any:
    return runtime_settings()[key]


def anonymous_allowed() -> bool:
    """``ALLOW_ANONYMOUS``, defaulting to Django's ``DEBUG``."""
    configured = runtime_setting("ALLOW_ANONYMOUS")
    return bool(settings.DEBUG) if configured is None else bool(configured)


def disconnect_policy(surface: str) -> str:
    """``cancel`` or ``continue`` for a dropped connection on ``surface`` (graphql,
    subscription, agui). A plain string setting applies to every surface."""
    configured = runtime_setting("ON_DISCONNECT")
    if isinstance(configured, str):
        return configured
    return str({**DEFAULTS["ON_DISCONNECT"], **(configured or {})}[surface])


@receiver(setting_changed)
def _forget_cached_settings(*, setting: str, **_: Any) -> None:
    # Tests change COPILOT_RUNTIME with override_settings; re-read it next time.
    if setting == "COPILOT_RUNTIME":
        runtime_settings.cache_clear()
        apply_process_settings()


def apply_process_settings() -> None:
    """Settings held by process-wide objects rather than read per use (the app's ``ready``).

    A malformed value is left alone here: the system checks name it (copilot_runtime/checks.py)
    instead of the start-up failing with a traceback."""
    try:
        size = runtime_setting("REMEMBERED_MESSAGES")
    except (TypeError, ValueError):  # COPILOT_RUNTIME itself is not a dict
        return
    if isinstance(size, int | float) and not isinstance(size, bool) and math.isfinite(size):
        HISTORIES.resize(int(size))
