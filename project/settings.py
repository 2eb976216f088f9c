"""Settings of the development/demo/test host project.

SQLite by default; ``DATABASE_URL=postgres://user@host:port/name`` switches to
PostgreSQL, behind Django's psycopg connection pool unless ``DATABASE_POOL=off``
(``DATABASE_POOL_MIN_SIZE``, ``_MAX_SIZE``, ``_TIMEOUT``; docs/scaling.md).
Secrets and switches come from the environment with safe local defaults; a
value that cannot be right stops startup with an error naming its variable.
"""

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_number(name: str, default: float, *, convert: type[int] | type[float] = int) -> float:
    """A number from the environment, or an error naming the variable and what it must be."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value: float | None = convert(raw)
    except ValueError:
        value = None
    if value is None or not 0 <= value < float("inf"):
        kind = "a whole number" if convert is int else "a number of seconds"
        raise ImproperlyConfigured(f"{name}={raw!r} is not {kind} (0 or more).")
    return value


def _pool_options() -> dict[str, float] | None:
    """Django's psycopg pool options from the environment; ``None`` when switched off.

    On unless ``DATABASE_POOL=off``. A pool hands each request (or task) one of
    at most ``max_size`` connections and takes it back at the end; a request
    that waits longer than ``timeout`` seconds for one fails (the API answers
    503 ``service_unavailable``). Sizing: docs/scaling.md.
    """
    switch = os.environ.get("DATABASE_POOL", "on").strip().lower()
    if switch in {"off", "0", "false", "no"}:
        return None
    if switch not in {"on", "1", "true", "yes"}:
        raise ImproperlyConfigured(f"DATABASE_POOL={switch!r} is neither 'on' nor 'off'.")
    if os.environ.get("DATABASE_CONN_MAX_AGE", "0").strip() not in {"", "0"}:
        # Django refuses persistent connections with a pool: say which variable to change.
        raise ImproperlyConfigured(
            "DATABASE_CONN_MAX_AGE keeps a connection per thread, which Django's connection "
            "pool does not allow: unset it, or set DATABASE_POOL=off to use it."
        )
    min_size = int(_env_number("DATABASE_POOL_MIN_SIZE", 2))
    max_size = int(_env_number("DATABASE_POOL_MAX_SIZE", 20))
    timeout = _env_number("DATABASE_POOL_TIMEOUT", 10.0, convert=float)
    if max_size < 1:
        raise ImproperlyConfigured("DATABASE_POOL_MAX_SIZE must be 1 or more.")
    if min_size > max_size:
        raise ImproperlyConfigured(
            f"DATABASE_POOL_MIN_SIZE ({min_size}) is larger than DATABASE_POOL_MAX_SIZE ({max_size})."
        )
    if timeout <= 0:
        raise ImproperlyConfigured("DATABASE_POOL_TIMEOUT must be more than 0 seconds.")
    return {"min_size": min_size, "max_size": max_size, "timeout": timeout}


def _database_from_url(url: str) -> dict[str, object]:
    parsed = urlparse(url)
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        pool = _pool_options()
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            # Without the pool: seconds a connection is kept between requests
            # (or Celery tasks); 0 (the default) opens one per request.
            "CONN_MAX_AGE": 0 if pool else int(_env_number("DATABASE_CONN_MAX_AGE", 0)),
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": {"pool": pool} if pool else {},
        }
    if parsed.scheme == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": unquote(parsed.path) or ":memory:"}
    raise ValueError(f"DATABASE_URL scheme {parsed.scheme!r} is not supported (postgres, sqlite)")


# A development-only fallback; production sets DJANGO_SECRET_KEY.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me")
DEBUG = _env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")
    if h.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "conversations",
    "project.demo_tools",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Pages answer a plain 503 with Retry-After, not a 500, when the database's
    # connection pool has no connection free (the API answers its own JSON 503).
    "conversations.database.DatabaseBusyMiddleware",
]

ROOT_URLCONF = "project.urls"

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

WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

_database_url = os.environ.get("DATABASE_URL", "").strip()
if _database_url:
    DATABASES = {"default": _database_from_url(_database_url)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH", str(BASE_DIR / "db.sqlite3")),
            "OPTIONS": {
                # Writers take the lock when they begin, so concurrent appends queue
                # instead of failing; WAL lets readers go on while one writes, and
                # with WAL, synchronous=NORMAL stays consistent after a crash
                # (only the last commits can be lost on power failure).
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }


AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

# Uploaded attachments (CONVERSATIONS["ATTACHMENT_STORAGE"] is "default": files under MEDIA_ROOT).
MEDIA_URL = "media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", str(BASE_DIR / "media")))

LOGIN_URL = "/admin/login/"
LOGIN_REDIRECT_URL = "/chat/"

# The app sets its own DRF policies on its views, and its schema view names
# the API and its version: neither REST_FRAMEWORK nor SPECTACULAR_SETTINGS is
# needed (the install test proves it in a fresh host project).

# The app's settings; the environment may choose the executor, the lease and
# the per-user stream limit
# (e.g. CONVERSATIONS_EXECUTOR=celery for web processes and workers alike).
CONVERSATIONS: dict[str, object] = {}
if os.environ.get("CONVERSATIONS_EXECUTOR"):
    CONVERSATIONS["EXECUTOR"] = os.environ["CONVERSATIONS_EXECUTOR"]
if os.environ.get("CONVERSATIONS_RUN_LEASE_SECONDS"):
    CONVERSATIONS["RUN_LEASE_SECONDS"] = int(os.environ["CONVERSATIONS_RUN_LEASE_SECONDS"])
if os.environ.get("CONVERSATIONS_MAX_STREAMS_PER_USER"):
    CONVERSATIONS["MAX_STREAMS_PER_USER"] = int(os.environ["CONVERSATIONS_MAX_STREAMS_PER_USER"])
if os.environ.get("CONVERSATIONS_TOOL_CONCURRENCY"):
    CONVERSATIONS["TOOL_CONCURRENCY"] = int(os.environ["CONVERSATIONS_TOOL_CONCURRENCY"])

if os.environ.get("CONVERSATIONS_EVENTS_URL"):
    CONVERSATIONS["EVENTS_URL"] = os.environ["CONVERSATIONS_EVENTS_URL"]

# Web processes and workers share the stream slots and the in-flight answer of
# a streaming run through the cache: with more than one process, point them all
# at one Redis (DJANGO_CACHE_URL=redis://127.0.0.1:6379/1); the default is each
# process's own memory. DJANGO_CACHE_KEY_PREFIX keeps apart deployments (or
# test sessions) that share one Redis database.
if os.environ.get("DJANGO_CACHE_URL"):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["DJANGO_CACHE_URL"],
            "KEY_PREFIX": os.environ.get("DJANGO_CACHE_KEY_PREFIX", ""),
        }
    }

# Celery (used when CONVERSATIONS["EXECUTOR"] is "celery"; see project/celery.py
# and docs/scaling.md). Tasks are acknowledged after they ran, so a message
# whose worker died is delivered again; the app's claim on each run makes the
# second delivery harmless. No result backend: nothing reads task results.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis redelivers a message not acknowledged within this many seconds, even
# while its worker is still busy with it: keep it above the longest run.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", "3600"))
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"conversations": {"handlers": ["console"], "level": "INFO"}},
}
