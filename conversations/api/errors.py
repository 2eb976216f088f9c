"""The API's one error shape, and the one place exceptions become HTTP answers.

Every error response is ``{"code": ..., "detail": ..., "errors": [...]}``:

- ``code``: a stable machine-readable string (the app's exception codes, DRF's
  codes such as ``not_found`` or ``throttled``, ``invalid`` for field errors);
- ``detail``: one sentence for humans, never a traceback nor a secret;
- ``errors``: a list of ``{"pointer", "parameter", "code", "detail"}`` items
  locating each problem: ``pointer`` is an RFC 6901 JSON pointer into the
  request body (``/messages/3/tool_call_id``), ``parameter`` a query parameter
  name; the one that does not apply is ``null``. Empty when nothing to locate.

The app's views install :func:`exception_handler` through their base class
(``get_exception_handler``), so the host never changes DRF's global settings.
Exceptions this module does not know are not caught. One error that is not
the app's is known: a database connection pool with no connection to give
(``conversations.database``) is 503 ``service_unavailable`` with
``Retry-After``, not a 500.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from django.utils import timezone
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import set_rollback

from conversations.database import RETRY_AFTER_SECONDS, database_busy
from conversations.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalForbidden,
    AttachmentTooLarge,
    BudgetExceeded,
    ConfigurationError,
    ContextTooLarge,
    ConversationBusy,
    ConversationsError,
    ExecutorUnavailable,
    InvalidArgumentError,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    RunAlreadyClaimed,
    RunCancelled,
    RunNotRunning,
    SearchTimeout,
    TooManyRuns,
    UnsupportedMediaType,
    WouldSplitToolCall,
)

__all__ = [
    "ERROR_STATUSES",
    "SERVICE_UNAVAILABLE",
    "APIError",
    "QueryValidationError",
    "blame_configuration",
    "database_busy_answer",
    "error_body",
    "error_item",
    "exception_handler",
    "json_pointer",
    "sentence",
    "status_for_code",
    "status_for_exception",
]

ERROR_STATUSES: Final[tuple[tuple[type[ConversationsError], int], ...]] = (
    # Order matters: the first matching class wins (both are InvalidArgumentErrors).
    (AttachmentTooLarge, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE),
    (UnsupportedMediaType, status.HTTP_415_UNSUPPORTED_MEDIA_TYPE),
    (InvalidArgumentError, status.HTTP_400_BAD_REQUEST),
    (ConversationBusy, status.HTTP_409_CONFLICT),
    (RunCancelled, status.HTTP_409_CONFLICT),
    (RunNotRunning, status.HTTP_409_CONFLICT),
    (RunAlreadyClaimed, status.HTTP_409_CONFLICT),
    (ApprovalAlreadyDecided, status.HTTP_409_CONFLICT),
    (ApprovalForbidden, status.HTTP_403_FORBIDDEN),
    (BudgetExceeded, status.HTTP_429_TOO_MANY_REQUESTS),
    (TooManyRuns, status.HTTP_429_TOO_MANY_REQUESTS),
    (WouldSplitToolCall, status.HTTP_409_CONFLICT),
    # The server is set up wrongly (a key reference that does not resolve, no
    # profile): not the client's fault, and not a bug (500) either.
    (ConfigurationError, status.HTTP_503_SERVICE_UNAVAILABLE),
    (ExecutorUnavailable, status.HTTP_503_SERVICE_UNAVAILABLE),
    # Too costly for now, not malformed: the same words may pass on a quieter database.
    (SearchTimeout, status.HTTP_503_SERVICE_UNAVAILABLE),
    # Order matters: the first matching class wins (ProviderTimeout is a
    # ProviderConnectionError, both are ProviderErrors).
    # The history cannot be sent as it is (a message larger than the window).
    (ContextTooLarge, status.HTTP_422_UNPROCESSABLE_ENTITY),
    (ProviderTimeout, status.HTTP_504_GATEWAY_TIMEOUT),
    (ProviderConnectionError, status.HTTP_503_SERVICE_UNAVAILABLE),
    (ProviderRateLimited, status.HTTP_503_SERVICE_UNAVAILABLE),
    (ProviderError, status.HTTP_502_BAD_GATEWAY),
)
"""The app's exceptions and their HTTP status: the only mapping in the API."""

TOO_MANY_RUNS_RETRY_AFTER: Final = 5
"""The ``Retry-After`` of ``too_many_runs``: a run ends in seconds to minutes; a client
that waits a little and tries again gets a place as soon as one does."""

SERVICE_UNAVAILABLE: Final = "service_unavailable"
"""The code of a 503 for want of a database connection (the pool's timeout passed)."""


def status_for_exception(exc: ConversationsError | type[ConversationsError]) -> int | None:
    """The HTTP status for one of the app's exceptions (or its class); ``None`` if unmapped."""
    cls = exc if isinstance(exc, type) else type(exc)
    for base, code in ERROR_STATUSES:
        if issubclass(cls, base):
            return code
    return None


def _subclasses(cls: type[ConversationsError]) -> Iterable[type[ConversationsError]]:
    yield cls
    for sub in cls.__subclasses__():
        yield from _subclasses(sub)


def status_for_code(code: str) -> int | None:
    """The HTTP status for a stored error code (``Run.error_code``); ``None`` if unknown.

    Derived from :data:`ERROR_STATUSES` through each exception class's ``code``,
    so a failed run answers exactly as the raised exception would have.
    """
    for cls in _subclasses(ConversationsError):
        if cls.code == code:
            return status_for_exception(cls)
    return None


@contextmanager
def blame_configuration() -> Iterator[None]:
    """Around a service called with validated input: a bad value is now the server's.

    An :class:`InvalidArgumentError` raised there comes from stored state (a
    profile forcing a tool it does not offer, a history an adapter refuses),
    not from the request, so it must not point into the request body: it
    becomes a :class:`ConfigurationError` (503) that keeps its code. A file
    too large for the provider (:class:`AttachmentTooLarge`) is the request's
    own: it stays a 413.
    """
    try:
        yield
    except AttachmentTooLarge:
        raise
    except InvalidArgumentError as exc:
        raise ConfigurationError(exc.detail, code=exc.code) from exc


class APIError(exceptions.APIException):
    """An API answer with its own code and located errors (413, unknown export format)."""

    def __init__(
        self,
        detail: str,
        *,
        code: str,
        status_code: int = status.HTTP_400_BAD_REQUEST,
        errors: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        super().__init__(detail=detail, code=code)
        self.code = code
        self.status_code = status_code
        self.errors = [dict(item) for item in errors]


class QueryValidationError(exceptions.ValidationError):
    """Field errors about query parameters (located by ``parameter``, not ``pointer``)."""


def json_pointer(path: Iterable[str | int]) -> str:
    """An RFC 6901 pointer to ``path`` (``~`` and ``/`` in keys escaped)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def sentence(text: Any) -> str:
    """``text`` as the API shows a message: starting with a capital letter.

    The app's exceptions speak in lower case (they read well inside a log
    line or another message); a client reads them on their own.
    """
    message = str(text)
    if message and message[0] in "\"'":
        # DRF's ``"week" is not a valid choice.``: the quoted value cannot be capitalised.
        return f"The value {message}"
    return message[:1].upper() + message[1:]


def error_item(
    code: str, detail: str, *, pointer: str | None = None, parameter: str | None = None
) -> dict[str, Any]:
    """One located problem of an error answer."""
    return {"pointer": pointer, "parameter": parameter, "code": code, "detail": sentence(detail)}


def error_body(code: str, detail: str, errors: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The one error shape, every message starting with a capital letter."""
    items = [dict(item) for item in errors]
    for item in items:
        if isinstance(item.get("detail"), str):
            item["detail"] = sentence(item["detail"])
    return {"code": code, "detail": sentence(detail), "errors": items}


def _field_errors(
    detail: Any, path: tuple[str | int, ...] = ()
) -> Iterable[tuple[tuple[str | int, ...], Any]]:
    """Flatten DRF's nested error detail into ``(path, ErrorDetail)`` pairs."""
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            # Errors about the object as a whole locate the object itself.
            sub = path if key == api_settings.NON_FIELD_ERRORS_KEY else (*path, key)
            yield from _field_errors(value, sub)
    elif isinstance(detail, list):
        if all(isinstance(item, str) for item in detail):
            for item in detail:
                yield path, item
        else:
            # A list of child results (many=True): one entry per item, {} when valid.
            for index, item in enumerate(detail):
                yield from _field_errors(item, (*path, index))
    else:
        yield path, detail


def _validation_errors(exc: exceptions.ValidationError) -> list[dict[str, Any]]:
    query = isinstance(exc, QueryValidationError)
    items = []
    for path, detail in _field_errors(exc.detail):
        code = getattr(detail, "code", None) or "invalid"
        if query:
            items.append(error_item(code, detail, parameter="/".join(map(str, path)) or None))
        else:
            items.append(error_item(code, detail, pointer=json_pointer(path)))
    return items


def _where(item: Mapping[str, Any]) -> str | None:
    """How a located problem names its place: ``Parameter "to"``, ``Field "messages/0/role"``."""
    if item.get("parameter"):
        return f'Parameter "{item["parameter"]}"'
    if item.get("pointer"):
        return f'Field "{item["pointer"][1:]}"'
    return None


def _summary(errors: list[dict[str, Any]]) -> str:
    """The answer's ``detail``: the one problem with its place, or the places of them all."""
    places = [_where(item) for item in errors]
    if len(errors) == 1:
        return f"{places[0]}: {errors[0]['detail']}" if places[0] else str(errors[0]["detail"])
    named = [place for place in places if place]
    if not named:
        return "The request is not valid."
    return f"The request is not valid: {', '.join(named)}."


def _api_exception_code(exc: exceptions.APIException) -> str:
    codes = exc.get_codes()
    return codes if isinstance(codes, str) else exc.default_code


def _api_exception_detail(exc: exceptions.APIException) -> str:
    return str(exc.detail) if isinstance(exc.detail, str) else str(exc.default_detail)


def _seconds_until(moment: datetime) -> int:
    """Whole seconds from now until ``moment`` (at least 1: the client must wait)."""
    return max(1, math.ceil((moment - timezone.now()).total_seconds()))


def database_busy_answer() -> tuple[dict[str, Any], dict[str, str]]:
    """The body and headers of the 503 for want of a database connection."""
    body = error_body(SERVICE_UNAVAILABLE, "The server is busy; try again in a moment.")
    return body, {"Retry-After": str(RETRY_AFTER_SECONDS)}


def exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response | None:
    """Turn a known exception into the one error shape; ``None`` for anything else."""
    if isinstance(exc, RequestDataTooBig):
        # Django would answer its own HTML 400 page.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = APIError(
            f"The request body is larger than the {limit} bytes accepted.",
            code="content_too_large",
            status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):
        # Django's message can name the model; the client learns only "not found".
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    headers: dict[str, str] = {}
    if isinstance(exc, APIError):
        detail = str(exc.detail)
        if len(exc.errors) == 1 and sentence(exc.errors[0].get("detail")) == sentence(detail):
            detail = _summary(exc.errors)  # the one located problem: name its place
        code, body = exc.status_code, error_body(exc.code, detail, exc.errors)
    elif isinstance(exc, exceptions.ValidationError):
        errors = _validation_errors(exc)
        code, body = exc.status_code, error_body("invalid", _summary(errors), errors)
    elif isinstance(exc, exceptions.APIException):
        auth_header = getattr(exc, "auth_header", None)
        if auth_header:
            headers["WWW-Authenticate"] = auth_header
        wait = getattr(exc, "wait", None)
        if wait:
            headers["Retry-After"] = str(int(wait))
        code = exc.status_code
        body = error_body(_api_exception_code(exc), _api_exception_detail(exc))
    elif isinstance(exc, ConversationsError):
        mapped = status_for_exception(exc)
        if mapped is None:
            return None
        errors = []
        if isinstance(exc, InvalidArgumentError) and exc.field is not None:
            # ``field`` is a slash path into the request body (the views prefix it).
            errors.append(
                error_item(exc.code, exc.detail, pointer=json_pointer(exc.field.split("/")))
            )
        if isinstance(exc, ProviderRateLimited) and exc.retry_after is not None:
            headers["Retry-After"] = str(int(exc.retry_after))
        if isinstance(exc, BudgetExceeded) and exc.resets_at is not None:
            headers["Retry-After"] = str(_seconds_until(exc.resets_at))
        if isinstance(exc, TooManyRuns):
            headers["Retry-After"] = str(TOO_MANY_RUNS_RETRY_AFTER)
        code, body = (
            mapped,
            error_body(exc.code, _summary(errors) if errors else exc.detail, errors),
        )
    elif database_busy(exc):
        body, busy_headers = database_busy_answer()
        code = status.HTTP_503_SERVICE_UNAVAILABLE
        headers.update(busy_headers)
    else:
        return None
    set_rollback()
    return Response(body, status=code, headers=headers)
