"""The errors this app raises, one tree, each with a stable ``code``.

Every error carries a short machine-readable ``code`` that the REST API returns
to clients unchanged, so codes are part of the public contract.

    ConversationsError
    ├── InvalidArgumentError (ValueError)   a value object or request is malformed
    │   ├── AttachmentTooLarge              a file over ``MAX_ATTACHMENT_BYTES`` (or a provider's limit)
    │   └── UnsupportedMediaType            a file whose sniffed type is not allowed
    ├── ConfigurationError                  a provider/profile/tool is misconfigured
    ├── ConversationBusy                    another run is already running
    │   └── ApprovalPending                 ...or waits for a tool call approval
    ├── ApprovalAlreadyDecided              the approval was decided before (final)
    ├── ApprovalForbidden                   this user may not decide this approval
    ├── RunCancelled                        the run was cancelled at a step boundary
    ├── RunNotRunning                       the run has already ended (cancel too late)
    │   └── RunFencedOut                    this process no longer holds the run it drives
    ├── RunAlreadyClaimed                   another process already executes the run
    ├── ExtractionFailed                    extract()'s run ended without valid output (``run``)
    ├── WouldSplitToolCall                  a fork cut would leave a call without its result
    ├── ExecutorUnavailable                 the task queue refused a run (broker down)
    ├── SearchTimeout                       a search ran past its time bound (``SEARCH_TIMEOUT_SECONDS``)
    ├── BudgetExceeded                      a blocking budget is used up (``budget``, ``resets_at``)
    ├── TooManyRuns                         the user already has as many runs running as allowed
    ├── MCPServerError                      an MCP server could not be reached or answered garbage
    └── ProviderError                       talking to a model provider failed
        ├── ProviderConnectionError         no answer (DNS, refused, reset)
        │   └── ProviderTimeout             the answer took too long
        ├── ProviderAuthenticationError     401 / 403
        ├── ProviderRateLimited             429 (``retry_after`` in seconds, if sent)
        ├── ProviderHTTPError               any other non-2xx (``status_code``, short body)
        ├── ContextTooLarge                 the request does not fit the model's context window
        └── ProviderResponseError           a 2xx body we cannot understand
            └── ProviderInvalidResponse     a value the store cannot hold, or too big

This module imports nothing from Django so that the pure domain layer can use it.
Messages never contain secrets: provider errors carry a redacted, truncated body.
"""

from __future__ import annotations

from datetime import datetime

__all__ = [
    "ApprovalAlreadyDecided",
    "ApprovalForbidden",
    "ApprovalPending",
    "AttachmentTooLarge",
    "BudgetExceeded",
    "ConfigurationError",
    "ContextTooLarge",
    "ConversationBusy",
    "ConversationsError",
    "ExecutorUnavailable",
    "ExtractionFailed",
    "InvalidArgumentError",
    "MCPServerError",
    "ProviderAuthenticationError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderInvalidResponse",
    "ProviderRateLimited",
    "ProviderResponseError",
    "ProviderTimeout",
    "RunAlreadyClaimed",
    "RunCancelled",
    "RunFencedOut",
    "RunNotRunning",
    "SearchTimeout",
    "TooManyRuns",
    "UnsupportedMediaType",
    "WouldSplitToolCall",
]


class ConversationsError(Exception):
    """Base of every error this app raises on purpose."""

    code: str = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def detail(self) -> str:
        """The human-readable message (safe to show to a client)."""
        return str(self.args[0]) if self.args else ""


class InvalidArgumentError(ConversationsError, ValueError):
    """A value does not satisfy a rule; ``code`` says which, ``field`` says where.

    ``field`` is a slash-separated path relative to the value being checked
    (``"tool_calls/0/id"``); callers that know the enclosing document prefix it
    (see :meth:`at`) so the API can answer with a JSON pointer.
    """

    code = "invalid_argument"

    def __init__(self, message: str, *, code: str, field: str | None = None) -> None:
        super().__init__(message, code=code)
        self.field = field

    def at(self, prefix: str | int) -> InvalidArgumentError:
        """Return a copy whose ``field`` is nested under ``prefix``."""
        path = str(prefix) if self.field is None else f"{prefix}/{self.field}"
        return InvalidArgumentError(self.detail, code=self.code, field=path)


class AttachmentTooLarge(InvalidArgumentError):
    """A file is larger than ``MAX_ATTACHMENT_BYTES``, or than a provider takes inline.

    ``code`` is ``attachment_too_large`` or ``attachment_too_large_for_provider``.
    """

    code = "attachment_too_large"


class UnsupportedMediaType(InvalidArgumentError):
    """A file's type, sniffed from its bytes, is not one ``ATTACHMENT_TYPES`` allows."""

    code = "unsupported_media_type"


class ConfigurationError(ConversationsError):
    """A provider, profile, secret reference or tool is not usable as configured."""

    code = "configuration_error"


class ConversationBusy(ConversationsError):
    """Another run is already running on this conversation."""

    code = "conversation_busy"


class ApprovalPending(ConversationBusy):
    """The conversation's run waits for a human decision on a tool call."""

    code = "approval_pending"


class ApprovalAlreadyDecided(ConversationsError):
    """The approval already has a decision; a decision is final."""

    code = "already_decided"


class ApprovalForbidden(ConversationsError):
    """The user may see this approval but not decide it (a staff-level call of their own)."""

    code = "approval_forbidden"


class RunCancelled(ConversationsError):
    """The run was cancelled; raised inside the loop at a step boundary."""

    code = "run_cancelled"


class ExtractionFailed(ConversationsError):
    """``extract()``'s run ended without a valid output; ``code`` is the run's error code
    (``output_invalid`` after a failed repair turn), ``run`` the stored run."""

    code = "extraction_failed"

    def __init__(self, message: str, *, code: str | None = None, run: object = None) -> None:
        super().__init__(message, code=code)
        self.run = run


class WouldSplitToolCall(ConversationsError):
    """A branch cut there would copy a tool call without the message that answers it."""

    code = "would_split_tool_call"


class RunNotRunning(ConversationsError):
    """The run has already ended, so it cannot be cancelled (or executed) any more."""

    code = "run_not_running"


class RunFencedOut(RunNotRunning):
    """The run ended or was taken over (recovery) while this process still drove it.

    Raised before a write, inside its transaction, so nothing is written: the
    process stops and leaves the run as whoever ended it left it.
    """

    code = "run_fenced_out"


class RunAlreadyClaimed(ConversationsError):
    """Another process has already taken the run to execute it (a duplicate delivery)."""

    code = "run_already_claimed"


class ExecutorUnavailable(ConversationsError):
    """The run could not be handed to the task queue (the ``celery`` executor)."""

    code = "executor_unavailable"


class SearchTimeout(ConversationsError):
    """A search query ran past ``CONVERSATIONS["SEARCH_TIMEOUT_SECONDS"]`` and was cancelled."""

    code = "search_timeout"


class BudgetExceeded(ConversationsError):
    """A blocking budget is used up for its period; no further model call may start.

    ``budget`` is its name, ``resets_at`` when its period ends (a timezone-aware
    ``datetime``; ``None`` for a ``total`` budget, which never resets).
    """

    code = "budget_exceeded"

    def __init__(self, message: str, *, budget: str, resets_at: datetime | None) -> None:
        super().__init__(message)
        self.budget = budget
        self.resets_at = resets_at


class TooManyRuns(ConversationsError):
    """The user already has ``limit`` runs running (``MAX_RUNS_PER_USER``); none more may start."""

    code = "too_many_runs"

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class MCPServerError(ConversationsError):
    """An MCP server could not be started, reached or understood (detail for admins)."""

    code = "mcp_server_error"


class ProviderError(ConversationsError):
    """Talking to a model provider failed."""

    code = "provider_error"


class ProviderConnectionError(ProviderError):
    """The provider could not be reached (DNS, refused or reset connection)."""

    code = "provider_unavailable"


class ProviderTimeout(ProviderConnectionError):
    """The provider did not answer in time."""

    code = "provider_timeout"


class ProviderAuthenticationError(ProviderError):
    """The provider refused our credentials (HTTP 401 or 403)."""

    code = "provider_authentication_failed"

    def __init__(self, message: str, *, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class ProviderRateLimited(ProviderError):
    """The provider answered 429; ``retry_after`` is its hint in seconds, if any."""

    code = "provider_rate_limited"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderHTTPError(ProviderError):
    """The provider answered with a non-2xx status not covered above."""

    code = "provider_http_error"

    def __init__(self, message: str, *, status_code: int, body: str = "") -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class ContextTooLarge(ProviderError):
    """The request does not fit the model's context window: found before sending it
    (``position`` and ``tokens`` name the message, or the view, too big), or said by the
    vendor (``status_code``)."""

    code = "context_too_large"

    def __init__(
        self,
        message: str,
        *,
        position: int | None = None,
        tokens: int | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.position = position
        self.tokens = tokens
        self.status_code = status_code


class ProviderResponseError(ProviderError):
    """The provider answered 2xx with a body we cannot understand."""

    code = "provider_bad_response"


class ProviderInvalidResponse(ProviderResponseError):
    """The answer holds a value the store cannot hold (an over-long id) or is too big."""

    code = "invalid_response"
