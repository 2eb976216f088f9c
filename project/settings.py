"""Settings of the development/demo/test host project.

SQLite by default; ``DATABASE_URL=postgres://user@host:port/name`` switches to
PostgreSQL. Secrets and switches come from the environment with safe local
defaults.
"""

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _database_from_url(url: str) -> dict[str, object]:
    parsed = urlparse(url)
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            # Seconds a connection is kept between requests (or Celery tasks);
            # 0 (the default) opens one per request.
            "CONN_MAX_AGE": int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
            "CONN_HEALTH_CHECKS": True,
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

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

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
if os.environ.get("CONVERSATIONS_EVENTS_URL"):
    CONVERSATIONS["EVENTS_URL"] = os.environ["CONVERSATIONS_EVENTS_URL"]

# Web processes and workers share the stream slots and the in-flight answer of
# a streaming run through the cache: with more than one process, point them all
# at one Redis (DJANGO_CACHE_URL=redis://127.0.0.1:6379/1); the default is each
# process's own memory.
if os.environ.get("DJANGO_CACHE_URL"):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["DJANGO_CACHE_URL"],
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
