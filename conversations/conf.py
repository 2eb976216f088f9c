"""The ``CONVERSATIONS`` settings namespace, read into a typed, cached object.

Host projects set only what they change::

    CONVERSATIONS = {"MAX_ITERATIONS": 6, "EXECUTOR": "celery"}

``app_settings()`` returns a frozen :class:`ConversationsSettings`; it is cached
and reset on Django's ``setting_changed`` signal, so ``override_settings`` works
in tests. Reading the object validates nothing: the system checks in
``checks.py`` report misconfiguration at startup with stable ids. The few
values the tool loop cannot run without are also read through
:func:`tool_concurrency` and :func:`tool_timeout`, which raise a
:class:`~conversations.exceptions.ConfigurationError` naming the key (a
worker process may never have run the checks).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from conversations.domain.storable import set_max_arguments_depth
from conversations.exceptions import ConfigurationError

__all__ = [
    "DEFAULTS",
    "ConversationsSettings",
    "app_settings",
    "demo_stream_delay",
    "max_runs_per_user",
    "positive_setting",
    "tool_concurrency",
    "tool_timeout",
]


@dataclasses.dataclass(frozen=True)
class ConversationsSettings:
    """Every setting of the app, with its default."""

    DEFAULT_PROFILE: str | None = None
    """Slug of the profile used when a conversation names none (else the profile marked default)."""
    MAX_ITERATIONS: int = 10
    """Tool-loop rounds when neither the call nor the profile says otherwise."""
    TOOL_RESULT_MAX_BYTES: int = 50_000
    """Tool results are cut (on a UTF-8 boundary, marker included) to this many bytes."""
    TOOL_CONCURRENCY: int = 8
    """At most this many calls of one model turn run at once."""
    TOOL_TIMEOUT_SECONDS: float = 60
    """A tool call still running after this long is answered as timed out (a tool's
    ``@tool(timeout=...)`` overrides it)."""
    RUN_LEASE_SECONDS: int = 300
    """A running run whose heartbeat is older than this is taken for dead by recovery."""
    SECRET_RESOLVER: str = "conversations.secrets.resolve_secret"  # noqa: S105
    """Dotted path of ``callable(reference: str) -> str | None`` resolving key references."""
    MAX_CONTENT_BYTES: int = 32_768
    """Largest user message the API accepts (UTF-8 bytes)."""
    MESSAGE_THROTTLE_RATE: str | None = "30/min"
    """DRF rate for posting messages, per user; ``None`` disables throttling."""
    EXECUTOR: str = "inline"
    """``inline`` (the request runs the loop) or ``celery`` (a worker runs it)."""
    HTTP_TIMEOUT: float = 60.0
    """Default provider timeout in seconds (a provider record may override it)."""
    APPROVAL_TIMEOUT_SECONDS: int | None = None
    """A tool call approval still pending after this long is rejected (``None``: never)."""
    HTTP_MAX_RETRIES: int = 2
    """Default retries on 429/5xx/connection errors (a provider record may override it)."""
    CURRENCY: str = "USD"
    """ISO 4217 code of every price and cost (prices on language models, budgets' cost limits)."""
    TRACE_CONTENT: bool = False
    """OpenTelemetry spans carry message content and tool arguments/results only when true."""
    SEARCH_CONFIG: str = "simple"
    """PostgreSQL text search configuration of message search (``english``, ...).

    Read when the search trigger is installed and by every query; after a
    change run ``manage.py rebuild_search_index``."""
    SEARCH_MAX_WORDS: int = 8
    """Most words a search query may have; the API answers more with a 400 naming ``q``."""
    SEARCH_MAX_CANDIDATES: int = 1_000
    """Only the newest this many matching messages are ranked (and paged through)."""
    SEARCH_TIMEOUT_SECONDS: float = 5.0
    """A search query still running after this long is cancelled: 503 ``search_timeout``."""
    REDACTION_MARKER: str = "[redacted]"
    """What redaction writes in place of contents, tool arguments and results."""
    MAX_STREAMS_PER_USER: int = 10
    """Event streams one user may hold open at once; the next one is a 429 (too_many_streams)."""
    MAX_RUNS_PER_USER: int = 4
    """Runs one user may have running at once (all conversations); the next one is a 429
    (``too_many_runs``). Runs waiting for an approval hold no connection and do not count."""
    LOGIN_FAILURE_LIMIT: int = 5
    """Failed logins on the chat's login page, per username and per client address, before
    it answers 429 until ``LOGIN_FAILURE_WINDOW_SECONDS`` after the first one."""
    LOGIN_FAILURE_WINDOW_SECONDS: int = 300
    """The window in which ``LOGIN_FAILURE_LIMIT`` failures are counted (cache timeout)."""
    MAX_JSON_DEPTH: int = 64
    """Deepest nesting accepted in a request body or in tool arguments; deeper provider
    arguments are kept as raw text and never executed."""
    MAX_SCHEMA_BYTES: int = 64 * 1024
    """Largest output schema accepted (its canonical JSON, UTF-8 bytes); a larger one is a
    400 (invalid_schema) in the API and an ``InvalidArgumentError`` in Python."""
    EVENTS_URL: str = ""
    """How live events of runs travel between processes: empty (in-process only),
    a Redis URL (``redis://host:6379/0``) or ``postgres`` (LISTEN/NOTIFY on the default database)."""
    DEMO_STREAM_DELAY_SECONDS: float = 1 / 30
    """Seconds the offline demo model pauses before each piece (a word, a piece of a call's
    arguments) of a streamed answer: about 30 a second; ``0`` streams at once. A demo
    provider record's ``stream_delay_seconds`` option, then the environment variable
    ``CONVERSATIONS_DEMO_STREAM_DELAY``, override it."""
    MCP_SERVER_PROFILE: str | None = None
    """Slug of the profile whose tools ``/mcp/`` serves (``None``: the endpoint answers 404)."""
    MAX_AGENT_DEPTH: int = 3
    """Longest chain of sub-agents (``Profile.agents``): a profile may call agents that call
    agents ... this many levels down, never more, and never itself. Forms and the database
    refuse a longer chain; the database's rule holds the value in force when the rules were
    installed (``manage.py migrate``; see docs/agents.md)."""
    ATTACHMENT_STORAGE: str = "default"
    """The key of Django's ``STORAGES`` attachments' bytes are stored on (``default``: the
    default storage, files under ``MEDIA_ROOT``; an S3 bucket through django-storages...)."""
    ATTACHMENT_TYPES: tuple[str, ...] = (
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "application/pdf",
        "text/plain",
        "text/markdown",
        "text/csv",
        "application/json",
    )
    """The media types an upload may have (sniffed from its bytes); anything else is a 415
    (``unsupported_media_type``). SVG, HTML and executables are refused whatever this says."""
    MAX_ATTACHMENT_BYTES: int = 20 * 1024 * 1024
    """Largest attachment, in bytes; a larger upload is a 413 (``attachment_too_large``)."""
    MAX_ATTACHMENTS_PER_MESSAGE: int = 10
    """Most attachments one message may reference; more is a 400 naming ``attachments``."""
    PDF_TEXT_MAX_PAGES: int = 50
    """A PDF sent as text to a model that cannot read PDFs: at most this many pages."""
    PDF_TEXT_MAX_CHARS: int = 100_000
    """...and at most this many characters of text."""
    PDF_TEXT_TIMEOUT_SECONDS: float = 10.0
    """...and no page is started after this many seconds of extracting."""


DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(ConversationsSettings)}


@functools.cache
def app_settings() -> ConversationsSettings:
    """The current settings (cached until a ``CONVERSATIONS`` change)."""
    user: Any = getattr(settings, "CONVERSATIONS", None) or {}
    known = {key: value for key, value in user.items() if key in DEFAULTS}
    return ConversationsSettings(**known)


def positive_setting(name: str, *, integer: bool = False) -> float:
    """``CONVERSATIONS[name]``, which must be a positive number (an integer if ``integer``).

    Raises :class:`ConfigurationError` naming the key and the value otherwise.
    """
    value = getattr(app_settings(), name)
    kinds = int if integer else int | float
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 < value < float("inf"):
        kind = "integer" if integer else "number"
        raise ConfigurationError(
            f"CONVERSATIONS[{name!r}] must be a positive {kind}, got {value!r}."
        )
    return value


def tool_concurrency() -> int:
    """``TOOL_CONCURRENCY``, validated (see :func:`positive_setting`)."""
    return int(positive_setting("TOOL_CONCURRENCY", integer=True))


def tool_timeout() -> float:
    """``TOOL_TIMEOUT_SECONDS``, validated (see :func:`positive_setting`)."""
    return positive_setting("TOOL_TIMEOUT_SECONDS")


def demo_stream_delay() -> float:
    """``DEMO_STREAM_DELAY_SECONDS``, which must be a number >= 0.

    Raises :class:`ConfigurationError` naming the key and the value otherwise.
    """
    value = app_settings().DEMO_STREAM_DELAY_SECONDS
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value < float("inf")
    ):
        raise ConfigurationError(
            f"CONVERSATIONS['DEMO_STREAM_DELAY_SECONDS'] must be a number >= 0 (seconds), "
            f"got {value!r}."
        )
    return float(value)


def max_runs_per_user() -> int:
    """``MAX_RUNS_PER_USER``, validated (see :func:`positive_setting`)."""
    return int(positive_setting("MAX_RUNS_PER_USER", integer=True))


def unknown_keys() -> list[str]:
    """Keys in ``CONVERSATIONS`` that this app does not know (reported by a check)."""
    user: Any = getattr(settings, "CONVERSATIONS", None) or {}
    return sorted(key for key in user if key not in DEFAULTS)


@receiver(setting_changed)
def _reset_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == "CONVERSATIONS":
        app_settings.cache_clear()
        apply_limits()


def apply_limits() -> None:
    """Hand the limits the domain enforces (it never reads Django settings) to it."""
    depth = app_settings().MAX_JSON_DEPTH
    if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 1:
        set_max_arguments_depth(depth)
