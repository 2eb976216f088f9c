"""Writing the transcript: create a conversation, append a batch of messages."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, Max, OuterRef, Q
from django.utils import timezone

from conversations import domain
from conversations.domain.context import estimate_message_tokens
from conversations.exceptions import InvalidArgumentError
from conversations.models import (
    TITLE_MAX_LENGTH,
    Conversation,
    Message,
    MessageAttachment,
    Run,
    ToolCall,
)
from conversations.selectors import TranscriptTail

from .. import _sql

__all__ = [
    "MessageDetails",
    "append_after",
    "append_messages",
    "check_title",
    "create_conversation",
]

PrepareCalls = Callable[[list[ToolCall]], None]
"""Called with an assistant message's new call rows just before they are inserted."""


@dataclass(frozen=True, slots=True)
class MessageDetails:
    """What a provider said about one message, stored beside it (assistant rows)."""

    model: str = ""
    """The model that answered, as the provider names it."""
    finish_reason: str = ""
    """Why it stopped (``stop``, ``length``, ``tool_calls``, ...)."""
    usage: domain.Usage | None = None
    """Token counts of the completion; ``None`` when the provider reported none."""
    latency_ms: int | None = None
    """Time to the answer, in milliseconds."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not isinstance(self.finish_reason, str):
            raise InvalidArgumentError(
                "model and finish_reason must be strings", code="invalid_details"
            )
        if self.usage is not None and not isinstance(self.usage, domain.Usage):
            raise InvalidArgumentError(
                "usage must be a Usage", code="invalid_details", field="usage"
            )
        latency = self.latency_ms
        if latency is not None and (
            isinstance(latency, bool) or not isinstance(latency, int) or latency < 0
        ):
            raise InvalidArgumentError(
                f"latency_ms must be a non-negative integer, got {latency!r}",
                code="invalid_details",
                field="latency_ms",
            )

    @classmethod
    def from_response(
        cls, response: domain.CompletionResponse, *, latency_ms: int | None = None
    ) -> MessageDetails:
        """The details of the assistant message made from ``response``."""
        return cls(
            model=response.model,
            finish_reason=response.finish_reason,
            usage=response.usage,
            latency_ms=latency_ms,
        )

    def as_fields(self) -> dict[str, Any]:
        """The ``Message`` field values these details fill."""
        fields: dict[str, Any] = {
            "model": self.model,
            "finish_reason": self.finish_reason,
            "latency_ms": self.latency_ms,
        }
        if self.usage is not None:
            fields.update(self.usage.to_dict(), usage_estimated=self.usage.estimated)
        return fields


def check_title(title: Any) -> None:
    """Refuse a title that is not a string of at most :data:`TITLE_MAX_LENGTH` characters."""
    if not isinstance(title, str) or len(title) > TITLE_MAX_LENGTH:
        raise InvalidArgumentError(
            f"title must be a string of at most {TITLE_MAX_LENGTH} characters",
            code="invalid_title",
            field="title",
        )


def create_conversation(
    *,
    owner: Any,
    title: str = "",
    profile: Any = None,
    metadata: Mapping[str, Any] | None = None,
) -> Conversation:
    """Create an empty conversation for ``owner``."""
    check_title(title)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidArgumentError(
            "metadata must be an object", code="invalid_metadata", field="metadata"
        )
    return Conversation.objects.create(
        owner=owner, title=title, profile=profile, metadata=dict(metadata or {})
    )


def append_messages(
    *,
    conversation: Conversation,
    messages: Sequence[domain.ChatMessage],
    run: Run | None = None,
    details: Sequence[MessageDetails | None] | None = None,
) -> list[Message]:
    """Persist ``messages`` at the end of ``conversation``, all or nothing.

    ``details`` (same length as ``messages``, ``None`` entries allowed) fills
    model, finish reason, usage and latency; ``provider_metadata`` and
    ``is_error`` come from each message. Positions are assigned under a lock on the conversation row
    (taken by the ``UPDATE`` of its ``updated_at`` on PostgreSQL; SQLite's
    ``BEGIN IMMEDIATE`` serialises writers), so concurrent appends never
    collide or leave gaps. The lock is held until the caller's outermost
    transaction commits: keep that transaction short.

    The batch is checked against the conversation before anything is written;
    an ``InvalidArgumentError`` names the offending item (``field`` ``"2/..."``):

    - ``missing_tool_call_id``: a tool message without ``tool_call_id``;
    - ``unknown_tool_call_id``: it matches no unanswered call of this
      conversation (earlier items of the batch included);
    - ``unanswered_tool_calls``: a user/system/assistant message while calls
      are still open (the detail names them);
    - ``duplicate_tool_call_id``: a call id already used in this conversation.

    The number of queries depends on how many assistant messages with calls the
    batch holds, not on how many calls or results.
    """
    items = _check_items(messages)
    extra = _check_details(details, len(items))
    if run is not None and run.conversation_id != conversation.pk:
        raise InvalidArgumentError(
            "the run belongs to another conversation", code="foreign_run", field="run"
        )
    if not items:
        return []
    new_call_ids = [call.id for item in items for call in item.tool_calls or ()]
    now = timezone.now()
    with transaction.atomic():
        last_position = _lock(conversation, now)
        open_calls, used_ids = _known_calls(conversation, new_call_ids)
        _check_grammar(items, open_calls, used_ids)
        rows = _write(conversation, items, extra, run, open_calls, last_position)
    conversation.updated_at = now
    return rows


def append_after(
    *,
    conversation: Conversation,
    messages: Sequence[domain.ChatMessage],
    tail: TranscriptTail,
    run: Run | None = None,
    details: Sequence[MessageDetails | None] | None = None,
    touch: bool = True,
    prepare_calls: PrepareCalls | None = None,
) -> list[Message]:
    """:func:`append_messages` for the writer that holds the conversation and knows its ``tail``.

    The same checks and errors, against ``tail`` instead of the stored rows,
    and the same rows; ``tail`` is advanced past them. Call inside the
    caller's transaction: it opens no savepoint of its own. ``touch=False``
    when the caller has already bumped ``updated_at`` (and so taken the
    conversation's row lock) in this transaction. ``prepare_calls`` may set
    fields of the call rows (their status) before they are inserted.
    """
    items = _check_items(messages)
    extra = _check_details(details, len(items))
    if not items:
        return []
    _check_grammar(items, tail.open_calls, tail.used_call_ids)
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        if touch:
            _touch(conversation, now)
        rows = _write(
            conversation, items, extra, run, tail.open_calls, tail.last_position, prepare_calls
        )
    tail.advance(rows)
    if touch:
        conversation.updated_at = now
    return rows


# Checks ---------------------------------------------------------------------------


def _check_items(messages: Sequence[domain.ChatMessage]) -> list[domain.ChatMessage]:
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidArgumentError(
            "messages must be a list of ChatMessage", code="invalid_messages", field="messages"
        )
    items = list(messages)
    for index, item in enumerate(items):
        if not isinstance(item, domain.ChatMessage):
            raise InvalidArgumentError(
                f"every message must be a ChatMessage, got {type(item).__name__}",
                code="invalid_message",
            ).at(index)
        for part_index, part in enumerate(item.parts):
            if part.attachment_id is None:
                # The record references stored files; it never holds their bytes.
                raise InvalidArgumentError(
                    "a file part must reference a stored attachment (store it first)",
                    code="unstored_part",
                    field=f"parts/{part_index}",
                ).at(index)
        if item.role is domain.Role.TOOL and item.tool_call_id is None:
            raise InvalidArgumentError(
                "a tool message needs the tool_call_id of the call it answers",
                code="missing_tool_call_id",
                field="tool_call_id",
            ).at(index)
    return items


def _check_details(
    details: Sequence[MessageDetails | None] | None, count: int
) -> list[MessageDetails | None]:
    if details is None:
        return [None] * count
    extra = list(details)
    if len(extra) != count:
        raise InvalidArgumentError(
            f"details must have one entry per message ({count}), got {len(extra)}",
            code="invalid_details",
            field="details",
        )
    for index, item in enumerate(extra):
        if item is not None and not isinstance(item, MessageDetails):
            raise InvalidArgumentError(
                "details entries must be MessageDetails or None",
                code="invalid_details",
            ).at(f"details/{index}")
    return extra


def _lock(conversation: Conversation, now: datetime) -> int:
    """Lock the conversation row and touch ``updated_at``; return the last position.

    The ``UPDATE`` is the lock (the row lock ``SELECT ... FOR NO KEY UPDATE``
    would take, held to commit) and the timestamp bump in one statement. The
    position is read by a second statement on purpose: under READ COMMITTED a
    statement that waited for the lock still reads other tables with the
    snapshot it started with, so it could miss the rows the previous holder
    just committed. Returns -1 for an empty conversation.
    """
    _touch(conversation, now)
    last = Message.objects.filter(conversation=conversation).aggregate(last=Max("position"))
    return -1 if last["last"] is None else last["last"]


def _touch(conversation: Conversation, now: datetime) -> None:
    touch_conversation(conversation.pk, now)


def _known_calls(
    conversation: Conversation, new_call_ids: Sequence[str]
) -> tuple[dict[str, int], set[str]]:
    """Open calls (call id -> row id) and which of ``new_call_ids`` are taken, in one query."""
    answered = Message.objects.filter(tool_call=OuterRef("pk"))
    rows = (
        ToolCall.objects.filter(conversation=conversation)
        .annotate(answered=Exists(answered))
        .filter(Q(answered=False) | Q(call_id__in=new_call_ids))
        .order_by("message_id", "index")
        .values_list("pk", "call_id", "answered")
    )
    open_calls: dict[str, int] = {}
    used: set[str] = set()
    for pk, call_id, is_answered in rows:
        used.add(call_id)
        if not is_answered:
            open_calls[call_id] = pk
    return open_calls, used


def _check_grammar(
    items: Sequence[domain.ChatMessage],
    open_calls: Mapping[str, int | ToolCall],
    used_ids: set[str],
) -> None:
    """Replay the batch against the stored state; raise on the first broken rule."""
    pending = list(open_calls)  # ordered: the error lists calls in call order
    used = set(used_ids)
    for index, item in enumerate(items):
        if item.role is domain.Role.TOOL:
            if item.tool_call_id not in pending:
                raise InvalidArgumentError(
                    f'tool_call_id "{item.tool_call_id}" matches no unanswered tool call '
                    "of this conversation",
                    code="unknown_tool_call_id",
                    field="tool_call_id",
                ).at(index)
            pending.remove(item.tool_call_id)
            continue
        if pending:
            raise InvalidArgumentError(
                f"a {item.role} message cannot follow unanswered tool calls: {', '.join(pending)}",
                code="unanswered_tool_calls",
            ).at(index)
        for call_index, call in enumerate(item.tool_calls or ()):
            if call.id in used:
                raise InvalidArgumentError(
                    f'tool call id "{call.id}" is already used in this conversation',
                    code="duplicate_tool_call_id",
                    field=f"tool_calls/{call_index}/id",
                ).at(index)
            used.add(call.id)
            pending.append(call.id)


# Writing ----------------------------------------------------------------------------


def _write(
    conversation: Conversation,
    items: Sequence[domain.ChatMessage],
    extra: Sequence[MessageDetails | None],
    run: Run | None,
    open_calls: Mapping[str, int | ToolCall],
    last_position: int,
    prepare_calls: PrepareCalls | None = None,
) -> list[Message]:
    """Insert rows in as few statements as the triggers allow.

    A call row needs its message's id and an answer needs its call's id, so
    messages are inserted in segments that end at an assistant message with
    calls, each followed by one bulk insert of those calls. Inside a segment
    rows go in position order, which is what the row-by-row triggers see.
    Each insert is ``bulk_create``'s, with its statement kept (``_sql.insert``).
    """
    call_rows: dict[str, int | ToolCall] = dict(open_calls)
    rows: list[Message] = []
    segment: list[Message] = []
    for offset, (item, details) in enumerate(zip(items, extra, strict=True)):
        row = Message(
            conversation=conversation,
            position=last_position + 1 + offset,
            role=item.role.value,
            content=item.content,
            is_error=item.is_error,
            run=run,
            provider_metadata=dict(item.provider_metadata or {}),
            # Written once, in the same insert: what choosing a call's view reads.
            token_estimate=estimate_message_tokens(item),
            **(details.as_fields() if details is not None else {}),
        )
        if item.tool_call_id is not None:
            target = call_rows[item.tool_call_id]
            if isinstance(target, ToolCall):
                row.tool_call = target
            else:
                row.tool_call_id = target
        segment.append(row)
        rows.append(row)
        if item.tool_calls:
            _sql.insert(segment)
            segment = []
            calls = [
                ToolCall(
                    message=row,
                    conversation=conversation,
                    index=call_index,
                    call_id=call.id,
                    name=call.name,
                    arguments=dict(call.arguments),
                    raw_arguments=call.raw_arguments,
                )
                for call_index, call in enumerate(item.tool_calls)
            ]
            if prepare_calls is not None:
                prepare_calls(calls)
            _sql.insert(calls)
            # Handed over as the prefetched relation: row.tool_calls.all() needs no query.
            # Django's private prefetch cache is not in the stubs.
            row._prefetched_objects_cache = {"tool_calls": calls}  # type: ignore[attr-defined]
            call_rows.update((call.call_id, call) for call in calls)
    if segment:
        _sql.insert(segment)
    _link_parts(items, rows)
    return rows


def _link_parts(items: Sequence[domain.ChatMessage], rows: Sequence[Message]) -> None:
    """One insert of the attachment links of every message with parts (none without)."""
    links = [
        # Every part has an attachment id (``_check_items``).
        MessageAttachment(message=row, attachment_id=str(part.attachment_id), position=position)
        for item, row in zip(items, rows, strict=True)
        for position, part in enumerate(item.parts)
    ]
    if links:
        MessageAttachment.objects.bulk_create(links)


def touch_conversation(conversation_id: Any, now: datetime) -> None:
    """Set the conversation's ``updated_at`` to ``now`` (and so lock its row).

    Raises ``Conversation.DoesNotExist`` when it is gone.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {_sql.table(Conversation)} SET updated_at = %s WHERE id = %s",
            [connection.ops.adapt_datetimefield_value(now), _sql.pk(Conversation, conversation_id)],
        )
        if cursor.rowcount != 1:
            raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
