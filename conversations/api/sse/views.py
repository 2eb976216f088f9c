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

from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from rest_framework import exceptions
from rest_framework.request import Request

from conversations import selectors
from conversations.conf import app_settings

from ..base import ConversationsAPIView
from ..compact import json_answer
from ..errors import QueryValidationError, error_body
from ..schema import document
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
    "RunEventsView",
    "event_stream_response",
    "run_events",
    "too_many_streams",
]

_MAX_ID = 2**53 - 1


# The view ---------------------------------------------------------------------------------


def _last_event_id(request: HttpRequest) -> int | None:
    raw = request.headers.get("Last-Event-ID") or request.GET.get("last_event_id")
    if raw is None or raw.strip() == "":
        return -1
    try:
        value = int(raw.strip())
    except ValueError:
        return None
    return value if -1 <= value <= _MAX_ID else None


class RunEventsView(ConversationsAPIView):
    """``GET /runs/{id}/events/``: the run's events as ``text/event-stream``.

    Owner only (anyone else gets 404, as everywhere in the API); the API's
    authentication, permissions and error answers, from the base view.
    ``Last-Event-ID`` (or ``?last_event_id=``) resumes after that persisted
    event; ``204`` when there is nothing left to send (the run ended and its
    last event was seen), which tells ``EventSource`` not to reconnect.
    """

    http_method_names = ["get"]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Any other method is a 405 before authentication, which would check
        # a session's CSRF token first and answer 403 to a read-only URL.
        if request.method != "GET":
            raise exceptions.MethodNotAllowed(request.method or "")
        super().initial(request, *args, **kwargs)

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # ``EventSource`` accepts only text/event-stream: its refusals are JSON all the same.
        return super().perform_content_negotiation(request, force=True)

    # A stream, not a JSON operation: described in docs/api.md, left out of the schema.
    @document(exclude=True)
    def get(self, request: Request, run_id: UUID) -> HttpResponseBase:
        if not selectors.owned_runs(user=request.user).filter(pk=run_id).exists():
            raise Http404
        after = _last_event_id(request._request)
        if after is None:
            raise QueryValidationError(
                {
                    "last_event_id": [
                        "Last-Event-ID must be an event id of this stream (an integer)."
                    ]
                }
            )
        stream = RunEventStream(run_id, after=after)
        first = stream.poll()
        if not first and stream.finished:
            return HttpResponse(status=204)
        slot = acquire_stream_slot(user_id=request.user.pk, lifetime=stream.max_seconds)
        if slot is None:
            return too_many_streams()
        return event_stream_response(request._request, stream, slot, first)


run_events = RunEventsView.as_view()
"""The view function ``urls`` routes ``runs/<id>/events/`` to."""


def too_many_streams() -> JsonResponse:
    """The 429 of a user who holds every stream slot already."""
    limit = app_settings().MAX_STREAMS_PER_USER
    detail = f"At most {limit} event streams may be open at once; close one first."
    return json_answer(
        error_body("too_many_streams", detail), status=429, headers={"Retry-After": "5"}
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
