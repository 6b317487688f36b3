"""System checks (``manage.py check``, and every ``runserver``/``migrate``): a configuration
that cannot work is reported with the key that is wrong, before a request finds out.

Ids: ``copilot_runtime.E001`` unknown key, ``E002`` wrong type, ``E003`` a dotted path that
does not import, ``E004`` an agent or adapter that cannot run, ``E005`` an unknown executor,
``E006`` Celery without a broker, ``E007`` served under WSGI (``runserver`` without an ASGI
server), ``E008`` a channels_redis list layer whose Redis reads time out before its blocking
reads end, ``E009`` a websocket timeout or bound out of range, ``W001`` anonymous callers
allowed with DEBUG off, ``W010`` middleware the hot endpoints' front does not run, ``W011`` a
fast lane closed by an untested library version (copilot_runtime/fastlane).
"""

from __future__ import annotations

import difflib
import inspect
import math
import os
import sys
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.module_loading import import_string

from copilot_runtime.conf import DEFAULTS, ENV_PREFIX, parse_env_value

TAG = "copilot_runtime"
EXECUTORS = ("inline", "celery")
# Settings whose default is None, and what they may be instead.
_OPTIONAL_TYPES: dict[str, tuple[type, ...]] = {
    "ALLOW_ANONYMOUS": (bool,),
    "ADAPTER": (dict,),
    "ON_BEFORE_REQUEST": (str,),
    "ON_AFTER_REQUEST": (str,),
}
# Settings that may be one value for every surface or a dict per surface.
_EITHER_TYPES: dict[str, tuple[type, ...]] = {"ON_DISCONNECT": (str, dict)}
_TYPE_WORDS = {
    bool: "true/false",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a dict",
}


def _configured() -> tuple[dict[str, Any], list[Error]]:
    """The project's dict merged with the environment, and the values that did not parse."""
    errors: list[Error] = []
    project = getattr(settings, "COPILOT_RUNTIME", None) or {}
    if not isinstance(project, dict):
        return {}, [Error("COPILOT_RUNTIME must be a dict.", id=f"{TAG}.E002")]
    merged = dict(project)
    for name, raw in os.environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :]
        try:
            merged[key] = parse_env_value(raw, merged.get(key, DEFAULTS.get(key)), key)
        except ValueError:
            expected = _TYPE_WORDS.get(type(DEFAULTS.get(key)), "a value of its type")
            errors.append(
                Error(
                    f"{name}={raw!r} is not {expected}.",
                    hint=f"Set {name} to {expected}, or unset it (default: {DEFAULTS.get(key)!r}).",
                    id=f"{TAG}.E002",
                )
            )
            merged.pop(key, None)
    return merged, errors


def _unknown_keys(configured: dict[str, Any]) -> Iterable[Error]:
    for key in sorted(set(configured) - set(DEFAULTS)):
        close = difflib.get_close_matches(key, DEFAULTS, n=1, cutoff=0.6)
        yield Error(
            f"COPILOT_RUNTIME has no setting {key!r}.",
            hint=f"Did you mean {close[0]!r}?" if close else "See copilot_runtime/conf.py.",
            id=f"{TAG}.E001",
        )


def _type_ok(key: str, value: Any) -> bool:
    default = DEFAULTS[key]
    if key in _EITHER_TYPES:
        return isinstance(value, _EITHER_TYPES[key])
    if default is None:
        return value is None or isinstance(value, _OPTIONAL_TYPES.get(key, (object,)))
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int | float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, type(default))


def _wrong_types(configured: dict[str, Any]) -> Iterable[Error]:
    for key, value in sorted(configured.items()):
        if key in DEFAULTS and not _type_ok(key, value):
            default = DEFAULTS[key]
            allowed = _OPTIONAL_TYPES.get(key) or _EITHER_TYPES.get(key) or (type(default),)
            words = " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in allowed)
            yield Error(
                f"COPILOT_RUNTIME[{key!r}] is {value!r} ({type(value).__name__}); it must be "
                f"{words}.",
                id=f"{TAG}.E002",
            )


def _dotted(where: str, path: Any) -> Iterable[Error]:
    if not isinstance(path, str):
        return
    try:
        import_string(path)
    except (ImportError, ValueError) as exc:
        yield Error(f"{where} = {path!r} does not import: {exc}", id=f"{TAG}.E003")


def _dotted_paths(configured: dict[str, Any]) -> Iterable[Error]:
    actions = configured.get("ACTIONS")
    for index, path in enumerate(actions if isinstance(actions, list) else []):
        yield from _dotted(f"COPILOT_RUNTIME['ACTIONS'][{index}]", path)
    for key in ("ON_BEFORE_REQUEST", "ON_AFTER_REQUEST", "TRACE_CONTENT_REDACT"):
        yield from _dotted(f"COPILOT_RUNTIME[{key!r}]", configured.get(key) or None)
    endpoints = configured.get("REMOTE_ENDPOINTS")
    for index, endpoint in enumerate(endpoints if isinstance(endpoints, list) else []):
        if isinstance(endpoint, dict):
            headers = endpoint.get("headers")
            yield from _dotted(f"COPILOT_RUNTIME['REMOTE_ENDPOINTS'][{index}]['headers']", headers)


def _agents_and_adapters() -> Iterable[Error]:
    # Imported here: the registry and runners import the engine, which must not load while
    # the app registry is being populated.
    from agents.registry import agent_list
    from agents.turns import check_agent_runnable
    from copilot_runtime.adapters import adapter_spec_for
    from copilot_runtime.adapters.kinds import AdapterSettingError, adapter_spec_check
    from copilot_runtime.errors import CopilotKitError

    for agent in agent_list():
        try:
            check_agent_runnable(agent)
        except CopilotKitError as error:
            if "none is configured" in error.message:
                continue  # a runtime without a model is a valid choice; its chat is refused
            yield Error(f"Agent {agent.name!r}: {error.message}", id=f"{TAG}.E004")
            continue
        try:
            spec = adapter_spec_check(adapter_spec_for(agent.name))
        except AdapterSettingError:
            continue  # reported above
        if spec["kind"] == "langchain":
            yield from _dotted(f"the {agent.name!r} agent's langchain factory", spec["factory"])


def _executor(configured: dict[str, Any]) -> Iterable[Error]:
    executor = configured.get("EXECUTOR", DEFAULTS["EXECUTOR"])
    if executor not in EXECUTORS:
        close = difflib.get_close_matches(str(executor), EXECUTORS, n=1)
        yield Error(
            f"COPILOT_RUNTIME['EXECUTOR'] is {executor!r}; it must be 'inline' or 'celery'.",
            hint=f"Did you mean {close[0]!r}?" if close else None,
            id=f"{TAG}.E005",
        )
    elif executor == "celery" and not getattr(settings, "CELERY_BROKER_URL", None):
        yield Error(
            "The celery executor needs a broker: CELERY_BROKER_URL is not set.",
            hint="Set CELERY_BROKER_URL (e.g. redis://localhost:6379/0) in the settings.",
            id=f"{TAG}.E006",
        )


def _served_by_wsgi() -> Iterable[Error]:
    """``runserver`` serves WSGI unless an ASGI server replaces it (daphne in INSTALLED_APPS):
    a v2 run would stream no text and be stored as cancelled."""
    if len(sys.argv) > 1 and sys.argv[1] == "runserver" and "daphne" not in settings.INSTALLED_APPS:
        yield Error(
            "The Copilot runtime streams over ASGI; Django's runserver serves WSGI.",
            hint="Serve the project with an ASGI server: `uvicorn <project>.asgi:application` "
            "(or add 'daphne' first in INSTALLED_APPS to make runserver serve ASGI).",
            id=f"{TAG}.E007",
        )


def _bypassed_middleware(configured: dict[str, Any]) -> Iterable[Warning]:
    """Middleware of the project that the front neither honours nor replaces on the two hot
    endpoints (copilot_runtime/endpoints/host_middleware.py)."""
    from copilot_runtime.endpoints.host_middleware import bypassed_middleware

    if configured.get("HOT_PATHS_THROUGH_DJANGO"):
        return
    bypassed = bypassed_middleware(list(getattr(settings, "MIDDLEWARE", [])))
    if bypassed:
        yield Warning(
            "The runtime's two hot endpoints (the v1 generateCopilotResponse POST and the v2 "
            "run) are served without Django's handler, so this middleware does not run for "
            "them: " + ", ".join(bypassed) + ".",
            hint="If it must see those requests, set COPILOT_RUNTIME['HOT_PATHS_THROUGH_DJANGO']"
            " = True (slower); otherwise silence copilot_runtime.W010 in "
            "SILENCED_SYSTEM_CHECKS.",
            id=f"{TAG}.W010",
        )


_LIST_LAYER = "channels_redis.core.RedisChannelLayer"


def _redis_default_socket_timeout() -> float | None:
    """redis-py's socket read timeout when a host names none: None up to redis-py 7, 5 s
    from redis-py 8."""
    from redis.asyncio.connection import AbstractConnection

    parameter = inspect.signature(AbstractConnection.__init__).parameters.get("socket_timeout")
    return None if parameter is None else parameter.default


def _host_socket_timeout(host: dict[str, Any], default: float | None) -> float | None:
    if "socket_timeout" in host:
        return host["socket_timeout"]
    address = host.get("address")
    if isinstance(address, str):
        from redis.asyncio.connection import parse_url

        try:
            return parse_url(address).get("socket_timeout", default)
        except ValueError:
            return None  # a bad address is the layer's own error, at its first use
    return default


def _list_layer_read_timeouts() -> Iterable[Error]:
    """channels_redis's list layer waits for a message with a blocking read of
    ``brpop_timeout`` (5 s) seconds. A socket timeout not well above it (redis-py 8's default
    is 5 s) ends an idle read with redis's ``TimeoutError`` instead: every websocket consumer and
    run follower idle for 5 s fails (channels_redis issue #422, redis-py issue #4091)."""
    layers = getattr(settings, "CHANNEL_LAYERS", None)
    for alias, layer in (layers if isinstance(layers, dict) else {}).items():
        if not isinstance(layer, dict) or layer.get("BACKEND") != _LIST_LAYER:
            continue
        config = layer.get("CONFIG") or {}
        if not isinstance(config, dict):
            continue  # the layer's own error, at its first use
        try:
            from channels_redis.core import RedisChannelLayer
            from channels_redis.utils import decode_hosts

            hosts = decode_hosts(config.get("hosts"))
        except (ImportError, TypeError, ValueError):
            continue  # the layer's own error, at its first use
        blocking = RedisChannelLayer.brpop_timeout
        default = _redis_default_socket_timeout()
        for index, host in enumerate(hosts):
            timeout = _host_socket_timeout(host, default)
            if not isinstance(timeout, int | float) or isinstance(timeout, bool):
                continue  # None (no timeout: right), or a value redis-py itself refuses
            if timeout <= 2 * blocking:
                yield Error(
                    f"CHANNEL_LAYERS[{alias!r}] host {index} reads Redis with a socket timeout "
                    f"of {timeout} s; the list layer's blocking reads last {blocking} s, so an "
                    "idle websocket or run follower fails with 'Timeout reading from ...'.",
                    hint='Give the host as a dict with no socket timeout: {"address": '
                    '"redis://...", "socket_timeout": None}.',
                    id=f"{TAG}.E008",
                )


def _websocket_limits(configured: dict[str, Any]) -> Iterable[Error]:
    """Values of the right type that still cannot work (a wrong type is E002)."""
    timeout = configured.get("WEBSOCKET_INIT_TIMEOUT_SECONDS")
    if _type_ok("WEBSOCKET_INIT_TIMEOUT_SECONDS", timeout) and not 0 < timeout < math.inf:
        yield Error(
            f"COPILOT_RUNTIME['WEBSOCKET_INIT_TIMEOUT_SECONDS'] is {timeout!r}; it must be a "
            "number of seconds above 0 (at 0 every websocket is closed before its "
            "connection_init).",
            id=f"{TAG}.E009",
        )
    for key in ("WEBSOCKET_MAX_CONNECTIONS", "WEBSOCKET_MAX_PENDING_INIT"):
        value = configured.get(key)
        if _type_ok(key, value) and (value < 0 or not float(value).is_integer()):
            yield Error(
                f"COPILOT_RUNTIME[{key!r}] is {value!r}; it must be a whole number of "
                "websockets, or 0 for no bound.",
                id=f"{TAG}.E009",
            )


def _anonymous(configured: dict[str, Any]) -> Iterable[Warning]:
    if configured.get("ALLOW_ANONYMOUS") is True and not settings.DEBUG:
        yield Warning(
            "COPILOT_RUNTIME['ALLOW_ANONYMOUS'] is on with DEBUG off: anyone who can reach the "
            "runtime can spend the project's model budget.",
            hint="Leave ALLOW_ANONYMOUS unset (anonymous callers only while DEBUG is on), or "
            "authenticate callers with a session or an API token.",
            id=f"{TAG}.W001",
        )


def _closed_lanes(configured: dict[str, Any]) -> Iterable[Warning]:
    from copilot_runtime.fastlane import TESTED, closed_by_version

    switch = bool(configured.get("FAST_LANE", DEFAULTS["FAST_LANE"]))
    for distribution, version in closed_by_version(switch=switch):
        tested = ", ".join(sorted(TESTED[distribution]))
        yield Warning(
            f"The fast lane for {distribution} is off: {distribution} {version} is not a "
            f"version it was tested with ({tested}).",
            hint=(
                "The runtime uses that library's public API instead, which is correct and "
                'slower (docs/production.md, "The fast lane"). Install a tested version to '
                'turn it on, or set COPILOT_RUNTIME["FAST_LANE"] = False to silence this.'
            ),
            id=f"{TAG}.W011",
        )


@register(Tags.compatibility, TAG)
def check_runtime_settings(app_configs: Any = None, **_: Any) -> list[Error | Warning]:
    configured, problems = _configured()
    messages: list[Error | Warning] = list(problems)
    messages.extend(_unknown_keys(configured))
    messages.extend(_wrong_types(configured))
    messages.extend(_dotted_paths(configured))
    messages.extend(_executor(configured))
    messages.extend(_served_by_wsgi())
    messages.extend(_list_layer_read_timeouts())
    messages.extend(_websocket_limits(configured))
    messages.extend(_anonymous(configured))
    messages.extend(_bypassed_middleware(configured))
    messages.extend(_closed_lanes(configured))
    if not any(isinstance(m, Error) and m.id == f"{TAG}.E002" for m in messages):
        messages.extend(_agents_and_adapters())
    return messages
