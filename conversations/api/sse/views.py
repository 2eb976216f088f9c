"""``GET /api/runs/{id}/events/``: a run's events as Server-Sent Events.

The stream is :class:`~conversations.api.sse.stream.RunEventStream`: the
persisted events (numbered from the run's rows, see
:mod:`conversations.api.sse.rows`) after ``Last-Event-ID``, then, while an
answer streams, one ``inflight`` event with the answer so far and its live
deltas (``text.delta``, ``reasoning.delta``, ``tool_call.delta``, without
ids), with new persisted events as soon as the loop commits them (the
``changed`` notification of :mod:`conversations.events`; the rows are read
again periodically too). :func:`event_stream_response` serves the same stream
as the answer to a posted message that asked for ``text/event-stream``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any
from uuid import UUID

from django.apps import apps
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from conversations.conf import app_settings
from conversations.models import Run

from ..errors import answer_database_busy, error_body, error_item
from .rows import STRIDE, RunEvent
from .slots import acquire_stream_slot, releasing, releasing_async
from .stream import (
    FALLBACK_POLL_SECONDS,
    KEEPALIVE_SECONDS,
    MAX_STREAM_SECONDS,
    POLL_SECONDS,
    RunEventStream,
)

__all__ = [
    "FALLBACK_POLL_SECONDS",
    "KEEPALIVE_SECONDS",
    "MAX_STREAM_SECONDS",
    "POLL_SECONDS",
    "STRIDE",
    "RunEvent",
    "RunEventStream",
    "event_stream_response",
    "run_events",
    "too_many_streams",
]

_MAX_ID = 2**53 - 1


# The view ---------------------------------------------------------------------------------


def _error(status: int, code: str, detail: str, **extra: Any) -> JsonResponse:
    headers = extra.pop("headers", None)
    response = JsonResponse(error_body(code, detail, extra.get("errors", ())), status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _authenticate(request: HttpRequest) -> tuple[Any, JsonResponse | None]:
    """The user, as the API's views would find it (token first, then session)."""
    tokens = apps.is_installed("rest_framework.authtoken")
    if tokens:
        try:
            found = TokenAuthentication().authenticate(request)  # type: ignore[arg-type]
        except exceptions.AuthenticationFailed as exc:
            return None, _error(
                401, "authentication_failed", str(exc.detail), headers={"WWW-Authenticate": "Token"}
            )
        if found is not None:
            return found[0], None
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return user, None
    detail = str(exceptions.NotAuthenticated.default_detail)
    if tokens:
        return None, _error(401, "not_authenticated", detail, headers={"WWW-Authenticate": "Token"})
    return None, _error(403, "not_authenticated", detail)


def _last_event_id(request: HttpRequest) -> int | None:
    raw = request.headers.get("Last-Event-ID") or request.GET.get("last_event_id")
    if raw is None or raw.strip() == "":
        return -1
    try:
        value = int(raw.strip())
    except ValueError:
        return None
    return value if -1 <= value <= _MAX_ID else None


@csrf_exempt  # read-only: any other method is a JSON 405, never the CSRF page
@answer_database_busy
def run_events(request: HttpRequest, run_id: UUID) -> HttpResponseBase:
    """``GET /runs/{id}/events/``: the run's events as ``text/event-stream``.

    Owner only (anyone else gets 404, as everywhere in the API); the same
    authentication as the API's views. ``Last-Event-ID`` (or
    ``?last_event_id=``) resumes after that persisted event; ``204`` when
    there is nothing left to send (the run ended and its last event was seen),
    which tells ``EventSource`` not to reconnect.
    """
    if request.method != "GET":
        return _error(
            405,
            "method_not_allowed",
            f'Method "{request.method}" not allowed.',
            headers={"Allow": "GET"},
        )
    user, failure = _authenticate(request)
    if failure is not None:
        return failure
    if not Run.objects.filter(pk=run_id, conversation__owner=user).exists():
        return _error(404, "not_found", "Not found.")
    after = _last_event_id(request)
    if after is None:
        detail = "Last-Event-ID must be an event id of this stream (an integer)."
        return _error(
            400,
            "invalid",
            detail,
            errors=[error_item("invalid", detail, parameter="last_event_id")],
        )
    stream = RunEventStream(run_id, after=after)
    first = stream.poll()
    if not first and stream.finished:
        return HttpResponse(status=204)
    slot = acquire_stream_slot(user_id=user.pk, lifetime=stream.max_seconds)
    if slot is None:
        return too_many_streams()
    return event_stream_response(request, stream, slot, first)


def too_many_streams() -> JsonResponse:
    """The 429 of a user who holds every stream slot already."""
    limit = app_settings().MAX_STREAMS_PER_USER
    return _error(
        429,
        "too_many_streams",
        f"At most {limit} event streams may be open at once; close one first.",
        headers={"Retry-After": "5"},
    )


def event_stream_response(
    request: HttpRequest, stream: RunEventStream, slot: str, first: Sequence[RunEvent] = ()
) -> StreamingHttpResponse:
    """``stream`` as ``text/event-stream`` (async under ASGI), giving ``slot`` back at its end."""
    content: Iterator[bytes] | AsyncIterator[bytes] = (
        releasing_async(stream.iter_async(first), slot)
        if isinstance(request, ASGIRequest)
        else releasing(stream.iter_sync(first), slot)
    )
    response = StreamingHttpResponse(content, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass events through as they come
    return response
