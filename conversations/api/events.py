"""Live events of a run as Server-Sent Events, derived from the persisted rows.

``GET /api/runs/{id}/events/`` streams what the tool loop stores, as it stores
it. Nothing is pushed between processes: every event is computed from rows
(the run, its messages and their calls), so a client attached to any web
process sees the same stream, and a reconnecting client resumes exactly where
it stopped.

Event ids are numbers made from message positions (``STRIDE`` = 100,000)::

    run_started         P * STRIDE            P = position of the run's first message
    assistant_turn      p * STRIDE + 1        the assistant message at position p
    tool_call_started   p * STRIDE + 2 + i    call i of that message, once it was marked running
    tool_call_finished  q * STRIDE + 1        the tool message (its result) at position q
    run_finished        L * STRIDE + 99,999   L = position of the run's last message

    approval.requested  p * STRIDE + 33,000 + i   call i of a held turn, needing approval
    approval.decided    p * STRIDE + 66,000 + i   the same, once no call of the turn is pending

(A run that ended without any message has ``run_started`` 0 and
``run_finished`` 99,999.) A call index fits a ``smallint``, so the slots of one
position never overlap each other or the next position.

A turn held for approval is stored with its calls and their approvals in one
transaction, and the decision that leaves none of them pending is committed
before any of its calls runs; so the ``approval.decided`` events of a turn
appear together, and its calls get no ``tool_call_started`` event (their
``started_at`` is written after the decisions, at lower ids than the
requests already sent): their results still arrive as ``tool_call_finished``.
A run waiting for approval has not ended: the stream stays open.

The ids only ever grow in the order the loop commits the rows: an assistant
turn (with its calls, ``pending``), then one ``UPDATE`` marking the calls that
will execute ``running`` (rejected calls never are, so they never get a
started event), then their results at later positions, and the run's status
in the same transaction as its last messages. A poll reads the run first,
then the messages, then their calls, each statement seeing at least what the
previous one saw, so it never sees a row without the rows committed before
it. Hence an event with an id lower than one already sent never appears
later, and ``Last-Event-ID: N`` means exactly "every event after N".

Under WSGI (the development server, gunicorn) the stream is a generator that
sleeps between polls in its request thread. Under ASGI (uvicorn) it is an
async generator: it sleeps on the event loop and borrows a thread of the
shared pool only for each short poll, so an idle stream holds no thread.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from asgiref.sync import SyncToAsync, sync_to_async
from django.apps import apps
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections, connections
from django.db.models import Max, Min, Prefetch
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from conversations.conf import app_settings
from conversations.models import BUSY_RUN_STATUSES, Message, Run, ToolApproval, ToolCall

from .errors import error_body, error_item
from .stream_slots import (
    acquire_stream_slot,
    release_connections,
    releasing,
    releasing_async,
)

__all__ = [
    "KEEPALIVE_SECONDS",
    "POLL_SECONDS",
    "STRIDE",
    "RunEvent",
    "RunEventStream",
    "run_events",
]

STRIDE = 100_000
"""Event ids per message position (see the module docstring)."""
POLL_SECONDS = 0.5
"""How often an open stream looks at the database."""
KEEPALIVE_SECONDS = 15.0
"""A comment line after this much silence keeps proxies from closing the connection."""
MAX_STREAM_SECONDS = 300.0
"""One response lasts at most this long; the client reconnects with ``Last-Event-ID``."""
RETRY_MS = 1000
"""The reconnection delay suggested to ``EventSource``."""

_MAX_ID = 2**53 - 1
_REQUESTED = 33_000
_DECIDED = 66_000


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One Server-Sent Event: its id, type and JSON data."""

    id: int
    type: str
    data: dict[str, Any]

    def encode(self) -> bytes:
        """The event on the wire (JSON never contains a raw newline, so one data line)."""
        payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        return f"id: {self.id}\nevent: {self.type}\ndata: {payload}\n\n".encode()


def _call_slots(message: Message, base: int) -> list[tuple[int, str, Any]]:
    """The call events of one assistant turn: started, or requested/decided when it was held."""
    approvals: list[tuple[ToolCall, ToolApproval]] = []
    for call in message.tool_calls.all():
        try:
            approvals.append((call, call.approval))
        except ToolApproval.DoesNotExist:
            continue
    if not approvals:
        return [
            (base + 2 + call.index, "tool_call_started", (message, call))
            for call in message.tool_calls.all()
            if call.started_at is not None
        ]
    slots: list[tuple[int, str, Any]] = [
        (base + _REQUESTED + call.index, "approval.requested", (message, approval))
        for call, approval in approvals
    ]
    if all(approval.decision for _, approval in approvals):
        slots.extend(
            (base + _DECIDED + call.index, "approval.decided", (message, approval))
            for call, approval in approvals
        )
    return slots


class RunEventStream:
    """The events of one run after a given id, read from the database poll by poll."""

    poll_seconds = POLL_SECONDS
    keepalive_seconds = KEEPALIVE_SECONDS
    max_seconds = MAX_STREAM_SECONDS

    def __init__(self, run_id: UUID, *, after: int = -1) -> None:
        self.run_id = run_id
        self.after = after
        self.finished = False
        self._first_position: int | None = None

    def poll(self) -> list[RunEvent]:
        """The events stored since the last one returned; sets ``finished`` after the last."""
        status = Run.objects.filter(pk=self.run_id).values_list("status", flat=True).first()
        if status is None:  # deleted with its conversation
            self.finished = True
            return []
        ended = status not in BUSY_RUN_STATUSES
        floor = max(self.after, 0) // STRIDE
        calls = ToolCall.objects.select_related("approval")
        messages = list(
            Message.objects.filter(run_id=self.run_id, position__gte=floor)
            .select_related("tool_call", "model_call")
            .prefetch_related(Prefetch("tool_calls", queryset=calls))
            .order_by("position")
        )
        first = self._first(messages, floor)
        slots: list[tuple[int, str, Any]] = []
        if first is not None or ended:
            opening = messages[0] if messages and messages[0].position == first else None
            slots.append(((first or 0) * STRIDE, "run_started", opening))
        for message in messages:
            base = message.position * STRIDE
            if message.role == Message.Role.ASSISTANT:
                slots.append((base + 1, "assistant_turn", message))
                slots.extend(_call_slots(message, base))
            elif message.role == Message.Role.TOOL:
                slots.append((base + 1, "tool_call_finished", message))
        finished_id = None
        if ended:
            last = self._last(messages, first)
            finished_id = (last or 0) * STRIDE + STRIDE - 1
            slots.append((finished_id, "run_finished", None))
        events = self._render(sorted((s for s in slots if s[0] > self.after), key=lambda s: s[0]))
        if events is None:  # deleted meanwhile
            self.finished = True
            return []
        if events:
            self.after = events[-1].id
        self.finished = finished_id is not None and self.after >= finished_id
        return events

    def _first(self, messages: Sequence[Message], floor: int) -> int | None:
        if self._first_position is None:
            if floor == 0:
                self._first_position = messages[0].position if messages else None
            else:
                found = Message.objects.filter(run_id=self.run_id).aggregate(p=Min("position"))
                self._first_position = found["p"]
        return self._first_position

    def _last(self, messages: Sequence[Message], first: int | None) -> int | None:
        if messages:
            return messages[-1].position
        if first is None:
            return None
        last: int | None = Message.objects.filter(run_id=self.run_id).aggregate(p=Max("position"))[
            "p"
        ]
        return last

    def _render(self, slots: Sequence[tuple[int, str, Any]]) -> list[RunEvent] | None:
        from conversations.selectors import runs_with_calls

        from .serializers import MessageSerializer, RunSerializer, ToolCallSerializer

        run_data: dict[str, Any] | None = None
        if any(kind in ("run_started", "run_finished") for _, kind, _ in slots):
            run = runs_with_calls(runs=Run.objects.filter(pk=self.run_id)).first()
            if run is None:
                return None
            run_data = RunSerializer(run).data
        events = []
        for event_id, kind, subject in slots:
            data: dict[str, Any]
            if kind == "run_started":
                opening = (
                    subject if subject is not None and subject.role == Message.Role.USER else None
                )
                data = {
                    "run": run_data,
                    "message": MessageSerializer(opening).data if opening is not None else None,
                }
            elif kind == "run_finished":
                data = {"run": run_data}
            elif kind == "assistant_turn":
                data = {"message": MessageSerializer(subject).data}
            elif kind == "tool_call_started":
                message, call = subject
                data = {"position": message.position, "call": ToolCallSerializer(call).data}
            elif kind in ("approval.requested", "approval.decided"):
                from .approvals import ApprovalSerializer

                message, approval = subject
                data = {"position": message.position, "approval": ApprovalSerializer(approval).data}
            else:  # tool_call_finished
                data = {
                    "message": MessageSerializer(subject).data,
                    "call": ToolCallSerializer(subject.tool_call).data,
                }
            events.append(RunEvent(event_id, kind, data))
        return events

    # Transports -------------------------------------------------------------------------

    def iter_sync(self, first: Sequence[RunEvent] = ()) -> Iterator[bytes]:
        """The stream for WSGI: polls in the request thread, holding no connection between."""
        release_connections()
        yield f"retry: {RETRY_MS}\n\n".encode()
        started = last_write = time.monotonic()
        events: Sequence[RunEvent] = first
        while True:
            if events:
                yield b"".join(event.encode() for event in events)
                last_write = time.monotonic()
            if self.finished or time.monotonic() - started > self.max_seconds:
                return
            if time.monotonic() - last_write >= self.keepalive_seconds:
                yield b": keep-alive\n\n"
                last_write = time.monotonic()
            time.sleep(self.poll_seconds)
            events = self.poll()
            release_connections()  # none held while the stream waits or writes

    async def iter_async(self, first: Sequence[RunEvent] = ()) -> AsyncIterator[bytes]:
        """The stream for ASGI: sleeps on the event loop, polls in the shared thread pool."""
        _release_request_thread()
        poll = sync_to_async(self._poll_and_close, thread_sensitive=False)
        yield f"retry: {RETRY_MS}\n\n".encode()
        started = last_write = time.monotonic()
        events: Sequence[RunEvent] = first
        while True:
            if events:
                yield b"".join(event.encode() for event in events)
                last_write = time.monotonic()
            if self.finished or time.monotonic() - started > self.max_seconds:
                return
            if time.monotonic() - last_write >= self.keepalive_seconds:
                yield b": keep-alive\n\n"
                last_write = time.monotonic()
            await asyncio.sleep(self.poll_seconds)
            events = await poll()

    def _poll_and_close(self) -> list[RunEvent]:
        # Each poll is treated like a request: CONN_MAX_AGE decides whether the
        # pool thread keeps its connection, and a broken one is dropped.
        try:
            return self.poll()
        finally:
            close_old_connections()


def _release_request_thread() -> None:
    """Let the thread Django kept for this ASGI request go while the stream idles.

    Django runs the sync parts of a request (middleware, this module's view)
    on a thread reserved for the request, which lives until the response has
    been sent: for a stream, the whole stream. Once the view has returned,
    nothing of this request needs that thread, so its executor is retired
    (after closing the view's database connection there); anything
    thread-sensitive later in the request simply gets a fresh one. asgiref
    offers no public call for this, hence the defensive look-ups: if its
    internals change, this does nothing and streams keep their thread.
    """
    context_var = getattr(SyncToAsync, "thread_sensitive_context", None)
    executors = getattr(SyncToAsync, "context_to_thread_executor", None)
    if context_var is None or executors is None:
        return
    context = context_var.get(None)
    if context is None or getattr(context, "_executor", None) is not None:
        return  # no per-request thread, or one the caller owns
    executor = executors.pop(context, None)
    if executor is not None:
        executor.submit(connections.close_all)
        executor.shutdown(wait=False)


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
def run_events(request: HttpRequest, run_id: UUID) -> HttpResponseBase:
    """``GET /runs/{id}/events/``: the run's events as ``text/event-stream``.

    Owner only (anyone else gets 404, as everywhere in the API); the same
    authentication as the API's views. ``Last-Event-ID`` (or
    ``?last_event_id=``) resumes after that event; ``204`` when there is
    nothing left to send (the run ended and its last event was seen), which
    tells ``EventSource`` not to reconnect.
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
        limit = app_settings().MAX_STREAMS_PER_USER
        return _error(
            429,
            "too_many_streams",
            f"At most {limit} event streams may be open at once; close one first.",
            headers={"Retry-After": "5"},
        )
    content: Iterator[bytes] | AsyncIterator[bytes] = (
        releasing_async(stream.iter_async(first), slot)
        if isinstance(request, ASGIRequest)
        else releasing(stream.iter_sync(first), slot)
    )
    response = StreamingHttpResponse(content, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass events through as they come
    return response
