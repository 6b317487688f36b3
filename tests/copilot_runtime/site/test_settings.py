"""The settings module's production checks, imported fresh in a subprocess per environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
# Printed by a successful import: what the production checks decided.
PROBE = (
    "import copilot_runtime.site.settings as s; "
    "print(s.DEBUG, s.COPILOT_RUNTIME['ALLOW_ANONYMOUS'], s.SECRET_KEY == s.DEFAULT_SECRET_KEY)"
)
OWN_SECRET_KEY = "a-long-random-secret-key-of-our-own-0123456789"


def import_settings(probe: str = PROBE, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        name: value
        for name, value in os.environ.items()
        if name not in {"ENVIRONMENT", "DEBUG", "SECRET_KEY", "REDIS_URL", "CELERY_BROKER_URL"}
        and not name.startswith("COPILOT_RUNTIME_")
    }
    return subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO_ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "env",
    [
        pytest.param({"DEBUG": "true", "SECRET_KEY": OWN_SECRET_KEY}, id="debug-on"),
        pytest.param({"DEBUG": "false"}, id="default-secret-key"),
        pytest.param({}, id="nothing-set"),
    ],
)
def test_production_refuses_debug_or_the_default_secret_key(env: dict[str, str]) -> None:
    result = import_settings(ENVIRONMENT="production", **env)

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "ENVIRONMENT=production" in result.stderr


def test_production_starts_with_debug_off_and_a_secret_key() -> None:
    result = import_settings(ENVIRONMENT="production", DEBUG="false", SECRET_KEY=OWN_SECRET_KEY)

    assert result.returncode == 0, result.stderr
    debug, allow_anonymous, default_key = result.stdout.split()
    assert (debug, default_key) == ("False", "False")
    # Anonymous callers are turned away in production unless the project allows them.
    assert allow_anonymous == "False"


def test_production_is_spelled_case_insensitively() -> None:
    result = import_settings(ENVIRONMENT=" Production ", DEBUG="1", SECRET_KEY=OWN_SECRET_KEY)

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr


def test_development_defaults_welcome_anonymous_callers_with_debug_on() -> None:
    result = import_settings()

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True"]


def test_span_content_is_kept_in_development_only_unless_enabled() -> None:
    probe = "import copilot_runtime.site.settings as s; print(s.COPILOT_RUNTIME['TRACE_CONTENT'])"
    development = import_settings(probe)
    production = import_settings(
        probe, ENVIRONMENT="production", DEBUG="false", SECRET_KEY=OWN_SECRET_KEY
    )

    assert (development.stdout.strip(), production.stdout.strip()) == ("True", "False")


# The production configuration the README documents (section Production).
DOCUMENTED_PRODUCTION = {
    "ENVIRONMENT": "production",
    "DEBUG": "false",
    "SECRET_KEY": "a-long-random-secret-key-of-our-own-0123456789-abcdefghijklmnopqrstuvwxyz",
    "ALLOWED_HOSTS": "copilot.example.com",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        name: value
        for name, value in os.environ.items()
        if name not in DOCUMENTED_PRODUCTION and not name.startswith("COPILOT_RUNTIME_")
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_deploy_is_clean_in_the_documented_production_configuration() -> None:
    clean = manage("check", "--deploy", "--fail-level", "WARNING", **DOCUMENTED_PRODUCTION)
    assert clean.returncode == 0, clean.stderr + clean.stdout
    assert "no issues" in clean.stdout
    # Without the HTTPS settings it says what is missing (the check can fail).
    bare = {
        key: DOCUMENTED_PRODUCTION[key]
        for key in ("ENVIRONMENT", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS")
    }
    warned = manage("check", "--deploy", "--fail-level", "WARNING", **bare)
    assert warned.returncode != 0
    assert "security.W004" in warned.stderr + warned.stdout


def test_a_single_redis_broker_gets_the_workers_transport() -> None:
    # copilot_runtime/fastlane/kombu.py; failover lists and Sentinel keep kombu's own transports.
    probe = (
        "import copilot_runtime.site.settings as s; "
        "print(getattr(s, 'CELERY_BROKER_TRANSPORT', None))"
    )

    def transport(**env: str) -> str:
        result = import_settings(probe, **env)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    ours = "copilot_runtime.broker:Transport"
    assert transport(REDIS_URL="redis://127.0.0.1:6379/0") == ours
    assert transport(CELERY_BROKER_URL="rediss://cache.example:6380/0") == ours
    assert transport(CELERY_BROKER_URL="redis://a:1/0;redis://b:1/0") == "None"
    assert transport(CELERY_BROKER_URL="sentinel://a:26379") == "None"
    assert transport() == "None"
