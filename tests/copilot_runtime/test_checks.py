"""The system checks: each configuration mistake is reported by ``manage.py check`` with the
key that is wrong (and a correct configuration reports nothing)."""

from __future__ import annotations

import sys

import pytest
from django.core.checks import Error
from django.test import override_settings

from copilot_runtime import checks
from copilot_runtime.checks import check_runtime_settings

pytestmark = pytest.mark.django_db


def ids(conf: dict | None = None) -> dict[str, str]:
    with override_settings(COPILOT_RUNTIME=conf or {}):
        return {
            message.id: message.msg + " " + (message.hint or "")
            for message in check_runtime_settings()
        }


def test_the_suites_configuration_is_clean() -> None:
    assert ids({}) == {}


def test_an_unknown_key_is_reported_with_a_suggestion() -> None:
    found = ids({"MAX_ITERATONS": 3})
    assert "copilot_runtime.E001" in found
    assert "'MAX_ITERATONS'" in found["copilot_runtime.E001"]
    assert "Did you mean 'MAX_ITERATIONS'?" in found["copilot_runtime.E001"]


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ({"MAX_ITERATIONS": "ten"}, "an integer"),
        ({"GUARDRAILS_ENABLED": "yes"}, "true/false"),
        ({"ACTIONS": "myapp.actions.add"}, "a list"),
        ({"ADAPTER": "openai"}, "a dict"),
        ({"ON_DISCONNECT": 3}, "a string or a dict"),
    ],
)
def test_a_value_of_the_wrong_type_names_the_key(conf: dict, words: str) -> None:
    found = ids(conf)
    [key] = conf
    assert key in found["copilot_runtime.E002"] and words in found["copilot_runtime.E002"]


def test_a_bad_number_in_the_environment_is_reported_not_a_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COPILOT_RUNTIME_MAX_ITERATIONS", "abc")
    found = ids({})
    assert "COPILOT_RUNTIME_MAX_ITERATIONS='abc' is not an integer" in found["copilot_runtime.E002"]


@pytest.mark.parametrize(
    "conf",
    [
        {"ACTIONS": ["myapp.nowhere.add"]},
        {"ON_BEFORE_REQUEST": "myapp.hooks.missing"},
        {"REMOTE_ENDPOINTS": [{"url": "http://x", "headers": "myapp.nope.headers"}]},
    ],
)
def test_a_dotted_path_that_does_not_import_is_reported(conf: dict) -> None:
    assert "does not import" in ids(conf)["copilot_runtime.E003"]


@pytest.mark.parametrize(
    ("conf", "text"),
    [
        ({"AGENTS": {"bot": {"kind": "python", "class": "myapp.agents.Missing"}}}, "'bot'"),
        ({"AGENTS": {"bot": {"kind": "telepathy"}}}, "Unknown agent kind"),
        ({"ADAPTER": {"kind": "anthropik"}}, "unknown adapter kind"),
        (
            {"ADAPTER": {"kind": "langchain", "factory": "myapp.models.nowhere"}},
            "does not import",
        ),
    ],
)
def test_agents_and_adapters_that_cannot_run_are_reported(conf: dict, text: str) -> None:
    found = ids(conf)
    reported = found.get("copilot_runtime.E004", "") + found.get("copilot_runtime.E003", "")
    assert text in reported


def test_a_runtime_without_a_model_is_a_valid_choice() -> None:
    assert ids({"ADAPTER": {"kind": "none"}}) == {}


def test_an_unknown_executor_and_celery_without_a_broker() -> None:
    assert "Did you mean 'celery'?" in ids({"EXECUTOR": "celerry"})["copilot_runtime.E005"]
    with override_settings(CELERY_BROKER_URL=""):
        assert "CELERY_BROKER_URL" in ids({"EXECUTOR": "celery"})["copilot_runtime.E006"]


def test_anonymous_callers_with_debug_off_are_warned_about() -> None:
    with override_settings(DEBUG=False):
        assert "copilot_runtime.W001" in ids({"ALLOW_ANONYMOUS": True})
        assert "copilot_runtime.W001" not in ids({})  # unset: only while DEBUG is on


def test_runserver_without_an_asgi_server_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["manage.py", "runserver"])
    found = ids({})
    assert "uvicorn" in found["copilot_runtime.E007"]
    with override_settings(INSTALLED_APPS=["daphne", "django.contrib.contenttypes"]):
        assert "copilot_runtime.E007" not in ids({})


LIST_LAYER = "channels_redis.core.RedisChannelLayer"
PUBSUB_LAYER = "channels_redis.pubsub.RedisPubSubChannelLayer"


def layer_ids(backend: str, hosts: list) -> dict[str, str]:
    layers = {"default": {"BACKEND": backend, "CONFIG": {"hosts": hosts}}}
    with override_settings(CHANNEL_LAYERS=layers):
        return ids({})


@pytest.mark.parametrize(
    "hosts",
    [
        ["redis://127.0.0.1:6379/0"],
        [("127.0.0.1", 6379)],
        [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 5}],
        [{"address": "redis://127.0.0.1:6379/0?socket_timeout=3"}],
        [{"address": "redis://a/0", "socket_timeout": None}, "redis://b/0"],  # the second one
        [],  # none given: channels_redis's localhost, at redis-py's default
    ],
)
def test_a_list_layer_whose_redis_reads_time_out_under_its_blocking_reads_is_an_error(
    hosts: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checks, "_redis_default_socket_timeout", lambda: 5)  # redis-py 8's
    found = layer_ids(LIST_LAYER, hosts)
    assert "Timeout reading from" in found["copilot_runtime.E008"]
    assert '"socket_timeout": None' in found["copilot_runtime.E008"]


@pytest.mark.parametrize(
    ("backend", "hosts", "default"),
    [
        (LIST_LAYER, [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": None}], 5),
        (LIST_LAYER, [{"address": "redis://127.0.0.1:6379/0?socket_timeout=60"}], 5),
        (LIST_LAYER, ["redis://127.0.0.1:6379/0"], None),  # redis-py up to 7: no read timeout
        (PUBSUB_LAYER, ["redis://127.0.0.1:6379/0"], 5),  # its reads carry their own timeout
    ],
)
def test_a_layer_that_reads_redis_long_enough_is_clean(
    backend: str, hosts: list, default: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checks, "_redis_default_socket_timeout", lambda: default)
    assert "copilot_runtime.E008" not in layer_ids(backend, hosts)


@pytest.mark.parametrize(
    "layers",
    [
        {"default": {"BACKEND": LIST_LAYER, "CONFIG": {"hosts": [{"socket_timeout": "5"}]}}},
        {"default": {"BACKEND": LIST_LAYER, "CONFIG": "redis://127.0.0.1:6379/0"}},
        {"default": {"BACKEND": LIST_LAYER, "CONFIG": {"hosts": "redis://127.0.0.1:6379/0"}}},
        {"default": {"BACKEND": LIST_LAYER, "CONFIG": {"hosts": [{"address": "nope://"}]}}},
        {"default": "not a dict"},
        "not a dict",
    ],
)
def test_a_channel_layer_setting_the_check_cannot_read_is_left_to_the_layer(
    layers: object,
) -> None:
    """Bad channel layer settings are Channels' to report at first use: the check passes them
    by instead of failing ``manage.py check`` with a traceback."""
    with override_settings(CHANNEL_LAYERS=layers):
        found = ids({})
    assert "copilot_runtime.E008" not in found


def test_the_installed_redis_clients_default_read_timeout_is_the_one_checked() -> None:
    import redis

    # redis-py 8 made it 5 s (the E008 case for a host given as a URL); before, none.
    expected = 5 if int(redis.__version__.split(".")[0]) >= 8 else None
    assert checks._redis_default_socket_timeout() == expected
    flagged = "copilot_runtime.E008" in layer_ids(LIST_LAYER, ["redis://127.0.0.1:6379/0"])
    assert flagged == (expected is not None)


def test_every_message_is_an_error_or_a_warning_with_our_id() -> None:
    with override_settings(COPILOT_RUNTIME={"NOPE": 1}):
        [message] = check_runtime_settings()
    assert isinstance(message, Error) and message.id.startswith("copilot_runtime.")
