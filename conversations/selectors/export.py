"""A user's data as JSON Lines: one conversation per line, in the import format.

Each line holds what ``POST /conversations/import/`` accepts (``title``,
``profile``, ``metadata``, ``messages`` in the OpenAI wire shape, ``is_error``
on failed tool results; on an assistant turn the tools the provider ran
itself, ``provider_tool_calls``, and the sources it cited, ``citations``, in
the shape the API shows them on a message) plus what the import ignores but
a person is owed: ids, times, where a branch forked, each call's status and
the runs with their usage. A message's files are references
(``attachments``: id, sha256, name, media type, size), never their bytes.
Seven queries read the conversations, messages, calls, attachment links,
provider tool calls, citations and runs as streams (rows fetched a chunk at
a time; a server-side cursor on PostgreSQL) in the same order, walked side
by side: the export holds one conversation at a time, so its memory does not
grow with the number of conversations.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Generic, TypeVar

from django.db.models import F, QuerySet

from conversations.domain import USAGE_FIELDS
from conversations.models import (
    Citation,
    Conversation,
    Message,
    MessageAttachment,
    ProviderToolCall,
    Run,
    ToolCall,
)

from .history import message_to_domain

__all__ = [
    "CITATION_KEYS",
    "PROVIDER_TOOL_CALL_KEYS",
    "citation_item",
    "conversation_lines",
    "provider_tool_call_item",
]

EXPORT_CHUNK_SIZE = 200
"""Rows fetched at a time from each of the export's streamed queries."""

_Row = TypeVar("_Row", Message, ToolCall, MessageAttachment, ProviderToolCall, Citation, Run)


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def conversation_lines(*, user: Any, chunk_size: int = EXPORT_CHUNK_SIZE) -> Iterator[str]:
    """Every conversation of ``user`` as one JSON line (``\\n``-terminated), oldest first.

    Seven queries in all, whatever the number of conversations or rows: the
    conversations, their messages, calls, attachment links, provider tool
    calls, citations and runs, each read as a stream in the conversations'
    order (``chunk_size`` rows at a time) and walked side by side, so only
    one conversation's rows are held at once.
    """
    order = ("conversation__created_at", "conversation_id")
    conversations = (
        Conversation.objects.filter(owner=user)
        .select_related("profile")
        .order_by("created_at", "pk")
        .iterator(chunk_size=chunk_size)
    )
    messages = _Stream(
        Message.objects.filter(conversation__owner=user)
        .select_related("tool_call")
        .annotate(conversation_created_at=F("conversation__created_at"))
        .order_by(*order, "position"),
        chunk_size,
    )
    calls = _Stream(
        ToolCall.objects.filter(conversation__owner=user)
        .annotate(conversation_created_at=F("conversation__created_at"))
        .order_by(*order, "message_id", "index"),
        chunk_size,
    )
    links = _Stream(
        MessageAttachment.objects.filter(message__conversation__owner=user)
        .select_related("attachment")
        .annotate(
            conversation_created_at=F("message__conversation__created_at"),
            conversation_id=F("message__conversation_id"),
        )
        .order_by(
            "message__conversation__created_at",
            "message__conversation_id",
            "message_id",
            "position",
        ),
        chunk_size,
    )
    ran = _Stream(_by_message(ProviderToolCall.objects.all(), user), chunk_size)
    cited = _Stream(_by_message(Citation.objects.all(), user), chunk_size)
    runs = _Stream(
        Run.objects.filter(conversation__owner=user)
        .annotate(conversation_created_at=F("conversation__created_at"))
        .order_by(*order, "started_at", "pk"),
        chunk_size,
    )
    for conversation in conversations:
        key = (conversation.created_at, conversation.pk)
        by_message: dict[int, list[ToolCall]] = defaultdict(list)
        for call in calls.take(key):
            by_message[call.message_id].append(call)
        files: dict[int, list[MessageAttachment]] = defaultdict(list)
        for link in links.take(key):
            files[link.message_id].append(link)
        activity = _Activity(_grouped(ran.take(key)), _grouped(cited.take(key)))
        line = _conversation(
            conversation, messages.take(key), by_message, files, activity, runs.take(key)
        )
        yield json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"


_Part = TypeVar("_Part", ProviderToolCall, Citation)


def _by_message(rows: QuerySet[_Part], user: Any) -> QuerySet[_Part]:
    """``rows`` of ``user``'s messages, in the export's order (a message's own by index)."""
    return (
        rows.filter(message__conversation__owner=user)
        .annotate(
            conversation_created_at=F("message__conversation__created_at"),
            conversation_id=F("message__conversation_id"),
        )
        .order_by(
            "message__conversation__created_at", "message__conversation_id", "message_id", "index"
        )
    )


def _grouped(rows: list[_Part]) -> dict[int, list[_Part]]:
    found: dict[int, list[_Part]] = defaultdict(list)
    for row in rows:
        found[row.message_id].append(row)
    return found


@dataclass(frozen=True, slots=True)
class _Activity:
    """A conversation's provider tool calls and citations, by message pk."""

    calls: dict[int, list[ProviderToolCall]]
    citations: dict[int, list[Citation]]


class _Stream(Generic[_Row]):
    """Rows ordered by their conversation's ``(created_at, pk)``, handed out one conversation at a time."""

    def __init__(self, rows: QuerySet[_Row], chunk_size: int) -> None:
        self.rows: Iterator[_Row] = rows.iterator(chunk_size=chunk_size)
        self.next: _Row | None = None
        self.started = False

    def _peek(self) -> _Row | None:
        if not self.started:
            self.next, self.started = next(self.rows, None), True
        return self.next

    def take(self, key: tuple[datetime, Any]) -> list[_Row]:
        """The rows of the conversation ``key``, skipping those of conversations before it.

        Rows of a conversation the first query did not see (created or deleted
        while the export runs) are skipped, never given to another one.
        """
        taken: list[_Row] = []
        while (row := self._peek()) is not None:
            at: Any = row.conversation_created_at  # type: ignore[attr-defined]
            # A link has its conversation as an annotation, the other rows as a column.
            row_key = (at, row.conversation_id)  # type: ignore[attr-defined]
            if row_key > key:
                break
            if row_key == key:
                taken.append(row)
            self.next = next(self.rows, None)
        return taken


def _conversation(
    conversation: Conversation,
    rows: list[Message],
    calls: dict[int, list[ToolCall]],
    files: dict[int, list[MessageAttachment]],
    activity: _Activity,
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
        item = message_to_domain(message, calls=calls.get(message.pk, ()), links=()).to_dict()
        if message.is_error:
            item["is_error"] = True
        if message.pk in files:
            item["attachments"] = [_reference(link) for link in files[message.pk]]
        if message.pk in activity.calls:
            item["provider_tool_calls"] = [
                provider_tool_call_item(row) for row in activity.calls[message.pk]
            ]
        if message.pk in activity.citations:
            item["citations"] = [citation_item(row) for row in activity.citations[message.pk]]
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


def _reference(link: MessageAttachment) -> dict[str, Any]:
    """An attachment as the export references it: never its bytes."""
    attachment = link.attachment
    return {
        "id": str(attachment.pk),
        "sha256": attachment.sha256,
        "name": attachment.name,
        "media_type": attachment.media_type,
        "size": attachment.size,
    }


PROVIDER_TOOL_CALL_KEYS: Final = {
    "kind": "kind",
    "provider": "provider",
    "id": "provider_call_id",
    "status": "status",
    "query": "query",
    "code": "code",
    "result_summary": "result_summary",
}
"""A provider tool call's keys as the API shows it on a message, each with its column."""
CITATION_KEYS: Final = {
    "start": "start_offset",
    "end": "end_offset",
    "url": "url",
    "title": "title",
    "source_id": "source_id",
}
"""A citation's keys as the API shows it on a message, each with its column."""


def provider_tool_call_item(row: ProviderToolCall) -> dict[str, Any]:
    """A provider tool call as the API shows it on a message (never its raw items)."""
    return {key: getattr(row, column) for key, column in PROVIDER_TOOL_CALL_KEYS.items()}


def citation_item(row: Citation) -> dict[str, Any]:
    """A citation as the API shows it on a message: its span of the text and its source."""
    return {key: getattr(row, column) for key, column in CITATION_KEYS.items()}
