"""A user's data as JSON Lines: one conversation per line, in the import format.

Each line holds what ``POST /conversations/import/`` accepts (``title``,
``profile``, ``metadata``, ``messages`` in the OpenAI wire shape, ``is_error``
on failed tool results) plus what it ignores but a person is owed: ids,
times, where a branch forked, each call's status and the runs with their
usage. Conversations are read in chunks of a fixed size (four queries per
chunk), so the export's memory does not grow with the number of
conversations.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from conversations.domain import USAGE_FIELDS
from conversations.models import Conversation, Message, Run, ToolCall

from .history import message_to_domain

__all__ = ["conversation_lines"]

EXPORT_CHUNK_SIZE = 200
"""Conversations read per round of queries."""


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def conversation_lines(*, user: Any, chunk_size: int = EXPORT_CHUNK_SIZE) -> Iterator[str]:
    """Every conversation of ``user`` as one JSON line (``\\n``-terminated), oldest first."""
    owned = (
        Conversation.objects.filter(owner=user)
        .select_related("profile")
        .order_by("created_at", "pk")
    )
    last: tuple[datetime, Any] | None = None
    while True:
        page = owned
        if last is not None:
            page = page.filter(created_at__gte=last[0]).exclude(created_at=last[0], pk__lte=last[1])
        chunk = list(page[:chunk_size])
        if not chunk:
            return
        yield from _lines(chunk)
        last = (chunk[-1].created_at, chunk[-1].pk)


def _lines(chunk: list[Conversation]) -> Iterator[str]:
    ids = [c.pk for c in chunk]
    messages: dict[Any, list[Message]] = defaultdict(list)
    for message in (
        Message.objects.filter(conversation__in=ids)
        .select_related("tool_call")
        .order_by("conversation_id", "position")
    ):
        messages[message.conversation_id].append(message)
    calls: dict[int, list[ToolCall]] = defaultdict(list)
    for call in ToolCall.objects.filter(conversation__in=ids).order_by("message_id", "index"):
        calls[call.message_id].append(call)
    runs: dict[Any, list[Run]] = defaultdict(list)
    for run in Run.objects.filter(conversation__in=ids).order_by("started_at", "pk"):
        runs[run.conversation_id].append(run)
    for conversation in chunk:
        line = _conversation(conversation, messages[conversation.pk], calls, runs[conversation.pk])
        yield json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"


def _conversation(
    conversation: Conversation,
    rows: list[Message],
    calls: dict[int, list[ToolCall]],
    runs: list[Run],
) -> dict[str, Any]:
    answered = {m.tool_call_id for m in rows if m.tool_call_id is not None}
    # A turn still running has calls without results, which no import accepts:
    # it is left out (``complete`` says so) and exported once it has ended.
    cut = next(
        (m.position for m in rows if any(c.pk not in answered for c in calls.get(m.pk, ()))),
        None,
    )
    kept = [m for m in rows if cut is None or m.position < cut]
    wire = []
    for message in kept:
        item = message_to_domain(message, calls=calls.get(message.pk, ())).to_dict()
        if message.is_error:
            item["is_error"] = True
        wire.append(item)
    profile = conversation.profile
    return {
        "id": str(conversation.pk),
        "title": conversation.title,
        "profile": profile.slug if profile is not None and profile.is_active else None,
        "metadata": conversation.metadata,
        "created_at": _time(conversation.created_at),
        "updated_at": _time(conversation.updated_at),
        "forked_from": str(conversation.forked_from_id) if conversation.forked_from_id else None,
        "forked_at_position": conversation.forked_at_position,
        "complete": cut is None,
        "messages": wire,
        "tool_calls": [
            {
                "id": call.call_id,
                "name": call.name,
                "status": call.status,
                "started_at": _time(call.started_at),
                "finished_at": _time(call.finished_at),
            }
            for message in kept
            for call in calls.get(message.pk, ())
        ],
        "runs": [
            {
                "id": str(run.pk),
                "status": run.status,
                "provider": run.provider,
                "model": run.model,
                "started_at": _time(run.started_at),
                "finished_at": _time(run.finished_at),
                "iterations": run.iterations,
                "usage": {name: getattr(run, name) for name in USAGE_FIELDS},
                "error_code": run.error_code,
            }
            for run in runs
        ],
    }
