"""What a web process of the standalone site loads: only what its configuration uses.

Celery, httpx and redis-py are 6-7, 4-5 and about 15 MiB of a web process's memory. The inline
executor never queues a run, local agents never call a peer and the in-memory channel layer
needs no Redis, so none is loaded until it is used; the celery executor still queues on the
site's own Celery app.
"""

from __future__ import annotations

import os

from tests.support.fresh_python import fresh_python

_INFRASTRUCTURE = {"REDIS_URL", "CELERY_BROKER_URL"}


def _probe(code: str, **env: str) -> list[str]:
    """Run ``code`` in a fresh interpreter with the site's settings and ``env``; its output."""
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("COPILOT_RUNTIME_") and name not in _INFRASTRUCTURE
    }
    clean.update({"DJANGO_SETTINGS_MODULE": "copilot_runtime.site.settings", **env})
    return fresh_python(code, env=clean)


SERVE = (
    "import sys\n"
    "import copilot_runtime.site.asgi\n"
    "print(*(name in sys.modules for name in ('celery', 'kombu', 'httpx', 'redis')))\n"
)


def test_a_web_process_on_the_inline_executor_loads_no_celery_httpx_or_redis() -> None:
    assert _probe(SERVE) == ["False", "False", "False", "False"]


def test_a_web_process_on_the_celery_executor_queues_on_the_sites_celery_app() -> None:
    code = SERVE + (
        "from celery import current_app\nprint(current_app.main, current_app.conf.broker_url)\n"
    )

    loaded = _probe(code, COPILOT_RUNTIME_EXECUTOR="celery", REDIS_URL="redis://127.0.0.1:9/0")

    assert loaded[:2] == ["True", "True"]
    assert loaded[4:] == ["copilot_runtime", "redis://127.0.0.1:9/0"]


def test_the_celery_command_finds_the_sites_app_that_the_settings_did_not_load() -> None:
    # What ``celery -A copilot_runtime.site worker`` does before the worker's settings load.
    code = (
        "import django\n"
        "django.setup()\n"
        "from celery.app.utils import find_app\n"
        "app = find_app('copilot_runtime.site')\n"
        "print(app.main, app.conf.broker_url)\n"
    )

    assert _probe(code, REDIS_URL="redis://127.0.0.1:9/0") == [
        "copilot_runtime",
        "redis://127.0.0.1:9/0",
    ]
