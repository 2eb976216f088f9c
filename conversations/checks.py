"""System checks with stable ids (``conversations.E0xx`` / ``W0xx``) and hints."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from .conf import app_settings, demo_stream_delay, positive_setting, unknown_keys
from .exceptions import ConfigurationError, ConversationsError


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report unusable values in the ``CONVERSATIONS`` setting."""
    messages: list[CheckMessage] = []
    for key in unknown_keys():
        messages.append(
            Warning(
                f"CONVERSATIONS[{key!r}] is not a known setting and is ignored.",
                hint="docs/install.md lists the settings (conversations.conf.DEFAULTS).",
                id="conversations.W001",
            )
        )
    conf = app_settings()
    positive_ints = (
        "MAX_ITERATIONS",
        "TOOL_RESULT_MAX_BYTES",
        "RUN_LEASE_SECONDS",
        "MAX_CONTENT_BYTES",
        "MAX_JSON_DEPTH",
        "MAX_STREAMS_PER_USER",
        "MAX_SCHEMA_BYTES",
        "MAX_RUNS_PER_USER",
        "LOGIN_FAILURE_LIMIT",
        "LOGIN_FAILURE_WINDOW_SECONDS",
    )
    for name in positive_ints:
        value = getattr(conf, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            messages.append(
                Error(
                    f"CONVERSATIONS[{name!r}] must be a positive integer, got {value!r}.",
                    id="conversations.E001",
                )
            )
    for name, integer, check_id in (
        ("TOOL_CONCURRENCY", True, "conversations.E001"),
        ("TOOL_TIMEOUT_SECONDS", False, "conversations.E012"),
        ("SEARCH_MAX_WORDS", True, "conversations.E001"),
        ("SEARCH_MAX_CANDIDATES", True, "conversations.E001"),
        ("SEARCH_TIMEOUT_SECONDS", False, "conversations.E012"),
    ):
        try:
            positive_setting(name, integer=integer)
        except ConfigurationError as exc:
            messages.append(Error(exc.detail, id=check_id))
    try:
        demo_stream_delay()
    except ConfigurationError as exc:
        messages.append(Error(exc.detail, id="conversations.E016"))
    timeout = conf.APPROVAL_TIMEOUT_SECONDS
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1
    ):
        messages.append(
            Error(
                "CONVERSATIONS['APPROVAL_TIMEOUT_SECONDS'] must be a positive integer or None, "
                f"got {timeout!r}.",
                id="conversations.E001",
            )
        )
    if conf.EXECUTOR not in {"inline", "celery"}:
        messages.append(
            Error(
                f"CONVERSATIONS['EXECUTOR'] must be 'inline' or 'celery', got {conf.EXECUTOR!r}.",
                hint="Use 'inline' unless Celery workers are running.",
                id="conversations.E002",
            )
        )
    if conf.EXECUTOR == "celery" and importlib.util.find_spec("celery") is None:
        messages.append(
            Error(
                "CONVERSATIONS['EXECUTOR'] is 'celery' but Celery is not installed.",
                hint="pip install 'django-llm-conversations[celery]', or use 'inline'.",
                id="conversations.E006",
            )
        )
    if not isinstance(conf.HTTP_MAX_RETRIES, int) or conf.HTTP_MAX_RETRIES < 0:
        messages.append(
            Error(
                "CONVERSATIONS['HTTP_MAX_RETRIES'] must be an integer >= 0.",
                id="conversations.E003",
            )
        )
    if not isinstance(conf.HTTP_TIMEOUT, int | float) or conf.HTTP_TIMEOUT <= 0:
        messages.append(
            Error(
                "CONVERSATIONS['HTTP_TIMEOUT'] must be a positive number.", id="conversations.E004"
            )
        )
    currency = conf.CURRENCY
    if not (isinstance(currency, str) and len(currency) == 3 and currency.isalpha()):
        messages.append(
            Error(
                f"CONVERSATIONS['CURRENCY'] must be a three-letter ISO 4217 code, got {currency!r}.",
                hint='For example "USD" or "EUR"; every price and cost is in it.',
                id="conversations.E007",
            )
        )
    if not isinstance(conf.TRACE_CONTENT, bool):
        messages.append(
            Error("CONVERSATIONS['TRACE_CONTENT'] must be True or False.", id="conversations.E008")
        )
    try:
        from django.utils.module_loading import import_string

        resolver = import_string(conf.SECRET_RESOLVER)
        if not callable(resolver):
            raise ImportError(conf.SECRET_RESOLVER)
    except ImportError:
        messages.append(
            Error(
                f"CONVERSATIONS['SECRET_RESOLVER'] {conf.SECRET_RESOLVER!r} cannot be imported.",
                hint="Give the dotted path of a callable(reference) -> str | None.",
                id="conversations.E005",
            )
        )
    try:
        from .selectors.search import search_config

        search_config()
    except ConversationsError as exc:
        messages.append(
            Error(
                exc.detail,
                hint="A PostgreSQL text search configuration such as 'simple' or 'english'.",
                id="conversations.E010",
            )
        )
    if not isinstance(conf.REDACTION_MARKER, str) or not conf.REDACTION_MARKER:
        messages.append(
            Error(
                "CONVERSATIONS['REDACTION_MARKER'] must be a non-empty string.",
                id="conversations.E011",
            )
        )
    messages.extend(_check_events_url(conf.EVENTS_URL))
    return messages


def _check_events_url(url: object) -> list[CheckMessage]:
    """``EVENTS_URL`` must name a transport whose client is installed."""
    from .events import transport_of

    try:
        kind = transport_of(url)
    except ValueError as exc:
        return [
            Error(
                f"CONVERSATIONS['EVENTS_URL'] {exc}.",
                hint="docs/scaling.md explains when processes need a shared transport.",
                id="conversations.E014",
            )
        ]
    if kind == "redis" and importlib.util.find_spec("redis") is None:
        return [
            Error(
                "CONVERSATIONS['EVENTS_URL'] is a Redis URL but redis-py is not installed.",
                hint="pip install 'django-llm-conversations[redis]' (Celery's Redis extra has it).",
                id="conversations.E015",
            )
        ]
    return []


@register()
def check_mcp_sdk(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Enabled MCP servers need the SDK of the ``mcp`` extra (no query when it is installed)."""
    from django.db import DatabaseError

    from .mcp import SDK_MISSING_HINT, sdk_installed
    from .models import MCPServer

    if sdk_installed():
        return []
    try:
        servers = list(MCPServer.objects.filter(enabled=True).values_list("slug", flat=True)[:5])
    except DatabaseError:  # not migrated yet: there is nothing configured to complain about
        return []
    if not servers:
        return []
    return [
        Error(
            f"MCP servers are enabled ({', '.join(servers)}) but the MCP SDK is not installed.",
            hint=SDK_MISSING_HINT,
            id="conversations.E020",
        )
    ]


@register()
def check_attachments(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The attachments' storage exists, their types can be served safely, their limits are positive."""
    from django.conf import settings

    from .services.attachments import NEVER_ALLOWED

    conf = app_settings()
    messages: list[CheckMessage] = []
    storages = getattr(settings, "STORAGES", {}) or {}
    if conf.ATTACHMENT_STORAGE not in storages:
        messages.append(
            Error(
                f"CONVERSATIONS['ATTACHMENT_STORAGE'] is {conf.ATTACHMENT_STORAGE!r}, which is "
                "not a key of STORAGES.",
                hint="Name a storage of STORAGES (default: 'default'); docs/attachments.md.",
                id="conversations.E030",
            )
        )
    types = conf.ATTACHMENT_TYPES
    if isinstance(types, str) or not isinstance(types, list | tuple):
        messages.append(
            Error(
                "CONVERSATIONS['ATTACHMENT_TYPES'] must be a list of media types.",
                id="conversations.E031",
            )
        )
    else:
        refused = sorted(str(t) for t in types if t in NEVER_ALLOWED or "/" not in str(t))
        if refused:
            messages.append(
                Warning(
                    f"CONVERSATIONS['ATTACHMENT_TYPES'] lists {', '.join(refused)}: such files "
                    "are refused anyway (a browser or a machine may run them).",
                    hint="Remove them; SVG, HTML, XML, scripts and executables are never stored.",
                    id="conversations.W030",
                )
            )
    for name, integer, check_id in (
        ("MAX_ATTACHMENT_BYTES", True, "conversations.E001"),
        ("MAX_ATTACHMENTS_PER_MESSAGE", True, "conversations.E001"),
        ("PDF_TEXT_MAX_PAGES", True, "conversations.E001"),
        ("PDF_TEXT_MAX_CHARS", True, "conversations.E001"),
        ("PDF_TEXT_TIMEOUT_SECONDS", False, "conversations.E012"),
    ):
        try:
            positive_setting(name, integer=integer)
        except ConfigurationError as exc:
            messages.append(Error(exc.detail, id=check_id))
    return messages
