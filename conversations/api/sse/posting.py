"""Posting a message with ``Accept: text/event-stream``: the answer is the run's event stream.

The request starts the run itself, so every refusal (validation, budgets, a
busy conversation, a profile that cannot be used, no stream slot left) is the
same JSON answer as without the header, sent before any event. A request that
writes before it starts the run (editing or regenerating makes a branch)
takes its slot first, so that a refusal leaves nothing behind. Then the run
is executed by a thread of this process (``inline`` executor) or by a worker
(``celery``), and the response relays its events from ``run_started`` on,
exactly as ``GET /runs/{id}/events/`` would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http.response import HttpResponseBase
from rest_framework.request import Request

from conversations.models import Attachment, Conversation, OutputSchema, Run
from conversations.services import submit_message

from ..errors import blame_configuration
from .slots import acquire_stream_slot, release_stream_slot
from .views import RunEventStream, event_stream_response, too_many_streams

__all__ = ["answer_with_events", "take_stream_slot", "wants_event_stream"]


def wants_event_stream(request: Any) -> bool:
    """Whether ``Accept`` asks for ``text/event-stream`` (with a quality above zero)."""
    for item in request.headers.get("Accept", "").split(","):
        media, _, params = item.strip().partition(";")
        if media.strip().lower() != "text/event-stream":
            continue
        quality = next(
            (p.split("=", 1)[1] for p in params.split(";") if p.strip().startswith("q=")), "1"
        )
        try:
            return float(quality) > 0
        except ValueError:
            return True
    return False


def take_stream_slot(request: Request) -> str | None:
    """One of the user's stream slots for a streaming answer; ``None`` when all are taken."""
    return acquire_stream_slot(user_id=request.user.pk, lifetime=RunEventStream.max_seconds)


def answer_with_events(
    request: Request,
    conversation: Conversation,
    content: str | None,
    *,
    slot: str | None = None,
    output_schema: OutputSchema | None = None,
    attachments: Sequence[Attachment] = (),
) -> HttpResponseBase | Run:
    """The streaming answer; or the run, when it ended before it started (the queue refused it).

    ``slot``: one the caller took (:func:`take_stream_slot`) before writing
    anything of its own; this answer releases it. Else one is taken here.
    """
    slot = slot or take_stream_slot(request)
    if slot is None:
        return too_many_streams()
    try:
        with blame_configuration():
            run = submit_message(
                conversation=conversation,
                content=content,
                background=True,
                output_schema=output_schema,
                attachments=attachments,
            )
    except BaseException:
        release_stream_slot(slot)
        raise
    if run.status == Run.Status.FAILED:
        release_stream_slot(slot)
        return run
    return event_stream_response(request._request, RunEventStream(run.pk), slot)
