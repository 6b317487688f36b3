"""Project settings, driven by the environment.

Infrastructure comes from the usual variables (``DATABASE_URL``, ``REDIS_URL``,
``CELERY_BROKER_URL``, ``SECRET_KEY``, ``ALLOWED_HOSTS``, ``DEBUG``, ``OPENAI_*``); product
settings live in ``COPILOT_RUNTIME`` (see ``copilot_runtime/conf.py``), each overridable as
``COPILOT_RUNTIME_<KEY>``. ``ENVIRONMENT=production`` turns on the production checks.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parents[2]


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


ENVIRONMENT = os.environ.get("ENVIRONMENT", "development").strip().lower()
# A Celery worker process (``celery ... worker``): its database access differs, see below.
CELERY_WORKER_PROCESS = "worker" in sys.argv and Path(sys.argv[0]).name.startswith("celery")
PRODUCTION = ENVIRONMENT == "production"

DEFAULT_SECRET_KEY = "insecure-development-key-change-me"
SECRET_KEY = os.environ.get("SECRET_KEY", DEFAULT_SECRET_KEY)
DEBUG = env_bool("DEBUG", not PRODUCTION)

if PRODUCTION and (DEBUG or SECRET_KEY == DEFAULT_SECRET_KEY):
    raise ImproperlyConfigured(
        "ENVIRONMENT=production refuses to start with DEBUG on or the default SECRET_KEY: "
        "set DEBUG=false and a SECRET_KEY of your own."
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])

# HTTPS, from the environment (`manage.py check --deploy` is clean with the production
# configuration the README documents). Behind a TLS-terminating proxy, trust its
# X-Forwarded-Proto (SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO); cookies are secure-only
# in production; HSTS and the HTTPS redirect are opt-in (the health checks stay on plain HTTP
# for the load balancer).
if os.environ.get("SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = (os.environ["SECURE_PROXY_SSL_HEADER"], "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", PRODUCTION)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "copilot_runtime",
    "conversations",
    "agents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "copilot_runtime.http.static.StaticFilesMiddleware",
    "copilot_runtime.http.cors.RuntimeCorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "copilot_runtime.site.urls"
ASGI_APPLICATION = "copilot_runtime.site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A pooled or persistent connection the server ended (a restart, a failover) is checked
    # before Django's own views reuse it (the runtime's hot paths check theirs themselves:
    # conversations/store/health.py).
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    options = DATABASES["default"].setdefault("OPTIONS", {})
    # An unreachable database must give callers a clear error quickly, not a hang.
    options.setdefault("connect_timeout", int(os.environ.get("DATABASE_CONNECT_TIMEOUT", "5")))
    # Celery's Django fix-up closes the whole pool around every task in a prefork worker, so a
    # worker keeps one persistent connection on its run thread instead.
    if CELERY_WORKER_PROCESS:
        DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("WORKER_CONN_MAX_AGE", "300"))
    elif env_bool("DATABASE_POOL", True):
        # Django runs each async request's ORM calls on a thread of its own, so without a pool
        # every request would open a new connection (a connect and an authentication each).
        options["pool"] = {
            "min_size": int(os.environ.get("DATABASE_POOL_MIN", "2")),
            "max_size": int(os.environ.get("DATABASE_POOL_MAX", "20")),
            "timeout": int(os.environ.get("DATABASE_CONNECT_TIMEOUT", "5")),
        }
        DATABASES["default"]["CONN_MAX_AGE"] = 0
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default serves a small team from one file: readers never wait for the writer
    # (WAL), a writer waits for another (busy timeout) instead of failing with "database is
    # locked", and takes the write lock when its transaction begins (IMMEDIATE), so two
    # transactions that read and then write cannot deadlock. The turn's writes are also queued
    # on one thread in-process (conversations/store/orm.py).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)

if REDIS_URL:
    # Pub/sub, not the list-based layer: a message is pushed to the subscribed process as it
    # is published, where the list-based one pops each of a process's messages with a round
    # trip of its own (one reader per process), which queued the worker's announcements under
    # load. The relay tolerates a lost announcement (it reads the event log), so pub/sub's
    # at-most-once delivery costs nothing.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve the admin's static files straight from the apps, no collectstatic step needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# The runtime endpoint answers cross-origin POSTs itself (see copilot_runtime/http/csrf.py).
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}, "django.channels.server": {"level": "WARNING"}},
}

COPILOT_RUNTIME = {
    # Anonymous callers are welcome on the embedded default, not in production unless enabled.
    "ALLOW_ANONYMOUS": not PRODUCTION,
    # Prompts and answers on spans while developing; in production only when enabled.
    "TRACE_CONTENT": not PRODUCTION,
    "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", ""),
    "OPENAI_BASE_URL": os.environ.get("OPENAI_BASE_URL", ""),
    "OPENAI_MODEL": os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
    # The TypeScript runtime's own variable names for Copilot Cloud, honoured as well.
    **{
        key: os.environ[key]
        for key in ("COPILOT_CLOUD_PUBLIC_API_KEY", "COPILOT_CLOUD_BASE_URL")
        if os.environ.get(key)
    },
}

# Runs are acknowledged when they end, so a worker that dies mid-turn does not lose them;
# a redelivered run does not execute twice (starting a run is idempotent).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A run mostly waits on the model: one worker process interleaves many on its event loop
# (copilot_runtime/tasks.py). The prefork pool (``-P prefork``) runs one per child process.
CELERY_WORKER_POOL = os.environ.get("CELERY_WORKER_POOL", "threads")
CELERY_WORKER_CONCURRENCY = int(os.environ.get("CELERY_WORKER_CONCURRENCY", "50"))
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # How long an unacknowledged run stays reserved before Redis redelivers it.
    "visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", "3600")),
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) and ";" not in CELERY_BROKER_URL:
    # kombu's Redis transport with less work per task message (copilot_runtime/fastlane/kombu.py),
    # named here and loaded by kombu: a process that queues nothing never imports it. Not for
    # failover lists (";") or Sentinel: kombu's own transports.
    CELERY_BROKER_TRANSPORT = "copilot_runtime.broker:Transport"
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE = {
    # Fail runs whose worker died, even when nobody is watching them.
    "reap-stale-runs": {"task": "copilot.reap_stale_runs", "schedule": 10.0},
}

# The standalone site's Celery app, loaded with its settings as the official Django pattern
# loads it from the project package (a host project's own app finds the runtime's tasks), so
# that it is the current app when a web process queues a run. A web process on the inline
# executor queues nothing and leaves Celery unloaded (and out of its memory); the ``celery``
# command loads the app itself (``-A copilot_runtime.site`` finds ``copilot_runtime.site.celery``).
_executor_choice = os.environ.get("COPILOT_RUNTIME_EXECUTOR") or COPILOT_RUNTIME.get("EXECUTOR", "")
if CELERY_WORKER_PROCESS or str(_executor_choice).strip().strip('"').lower() == "celery":
    # Imported for its effect: creating the app makes it Celery's current app.
    import_module("copilot_runtime.site.celery")
