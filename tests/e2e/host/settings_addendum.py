# Appended to a `django-admin startproject` settings.py by tests/e2e/test_host_project.py:
# exactly the README's "Add it to an existing Django project" steps, plus this test's own
# database and model (the fake upstream).
import os

import dj_database_url

INSTALLED_APPS += ["copilot_runtime", "conversations", "agents"]  # noqa: F821
MIDDLEWARE.insert(1, "copilot_runtime.http.cors.RuntimeCorsMiddleware")  # noqa: F821
COPILOT_RUNTIME = {
    "ADAPTER": {
        "kind": "openai",
        "api_key": "test",
        "base_url": os.environ["FAKE_MODEL_BASE_URL"],
        "max_retries": 0,
    }
}

DATABASES = {"default": dj_database_url.parse(os.environ["HOST_DATABASE_URL"])}
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
STATIC_ROOT = BASE_DIR / "static"  # noqa: F821
