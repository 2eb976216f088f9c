"""The history: stored rows turned into the domain's value objects, in constant queries."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import (
    Case,
    Exists,
    F,
    Max,
    OuterRef,
    Subquery,
    Sum,
    Value,
    When,
    Window,
)
from django.db.models.functions import Coalesce

from conversations import domain
from conversations.domain.context import history_read_bound as bound_for
from conversations.domain.context import provider_family
from conversations.domain.estimates import DEFAULT_OUTPUT_TOKENS
from conversations.models import (
    Attachment,
    Conversation,
    Message,
    MessageAttachment,
    Profile,
    ToolCall,
)

__all__ = [
    "Reported",
    "TranscriptTail",
    "attachment_part",
    "get_history",
    "history_and_tail",
    "history_for_provider",
    "history_read_bound",
    "message_to_domain",
    "open_tool_calls",
    "tool_call_to_domain",
    "transcript_tail",
]

_ROW_FIELDS = (
    "id",
    "position",
    "role",
    "content",
    "is_error",
    "provider_metadata",
    "tool_call_id",
    "tool_call__call_id",
    "tool_calls__id",
    "tool_calls__call_id",
    "tool_calls__name",
    "tool_calls__arguments",
    "tool_calls__raw_arguments",
    "attachment_links__attachment_id",
    "attachment_links__attachment__media_type",
    "attachment_links__attachment__name",
    "attachment_links__attachment__size",
)
"""One row per message and call or attachment of it (the joins repeat a message per call or
attachment; only assistant messages have calls, only user and tool messages attachments)."""


def tool_call_to_domain(call: ToolCall) -> domain.ToolCall:
    """One stored call as the value object (the provider's id, name and arguments)."""
    return domain.ToolCall(
        id=call.call_id,
        name=call.name,
        arguments=call.arguments,
        raw_arguments=call.raw_arguments,
    )


def message_to_domain(
    message: Message,
    *,
    calls: Iterable[ToolCall] | None = None,
    links: Iterable[MessageAttachment] | None = None,
) -> domain.ChatMessage:
    """One stored message as a :class:`~conversations.domain.ChatMessage`.

    ``calls`` are the message's tool calls in order; when omitted they are read
    from ``message.tool_calls.all()`` (prefetch them when mapping many). A tool
    message reads ``message.tool_call`` (``select_related`` it). ``links`` are
    its attachment links with their attachments, in order; when omitted they
    are read from ``message.attachment_links`` (prefetch them too). The parts
    are references: their bytes are not loaded.
    """
    role = domain.Role(message.role)
    tool_calls: list[domain.ToolCall] = []
    tool_call_id: str | None = None
    if role is domain.Role.ASSISTANT:
        if calls is None:
            calls = message.tool_calls.all()
        tool_calls = [tool_call_to_domain(call) for call in calls]
    elif role is domain.Role.TOOL:
        # A constraint gives every tool message the call it answers.
        assert message.tool_call is not None
        tool_call_id = message.tool_call.call_id
    if links is None:
        links = message.attachment_links.all()
    parts = [attachment_part(link.attachment) for link in links]
    row = (message.pk, message.position, role, message.content, message.is_error)
    return _message((*row, message.provider_metadata, tool_call_id), tool_calls, parts)


def attachment_part(attachment: Attachment) -> domain.FilePart:
    """An attachment as the part a message carries: a reference, its bytes not loaded."""
    return domain.FilePart(
        attachment.media_type,
        b"",
        name=attachment.name,
        attachment_id=str(attachment.pk),
        size=attachment.size,
    )


@dataclass(frozen=True, slots=True)
class Reported:
    """What the provider reported for the last answered call of a history read with a bound."""

    prompt_tokens: int
    """The input tokens it reported: exact for what that call sent."""
    first_position: int
    """The first stored position it sent."""
    answer_position: int
    """The position of its answer (it sent the messages before it)."""


@dataclass(slots=True)
class TranscriptTail:
    """The end of a stored conversation, as the one writer holding it keeps it in memory.

    A run holds its conversation (one running run at most, a database rule),
    so after one read it can append without reading the rows again: the next
    position, the calls still open and the call ids already taken are known.
    Another writer appending meanwhile is refused by the database (positions
    are unique), never interleaved.
    """

    last_position: int = -1
    """Position of the last message (-1: none)."""
    open_calls: dict[str, ToolCall | int] = field(default_factory=dict)
    """Unanswered calls, call id -> row (or its primary key), in call order."""
    used_call_ids: set[str] = field(default_factory=set)
    """Every call id of the conversation (they are unique per conversation); of the messages
    read, when the read was bounded (the database refuses a duplicate of an older one)."""
    first_position: int = 0
    """Position of the first message read (more than 0: a bounded read left older ones out)."""
    reported: Reported | None = None
    """The provider's report on the last answered call read (a bounded read only)."""

    def advance(self, rows: Iterable[Message]) -> None:
        """Take appended rows into account (their calls as the prefetched relation)."""
        for row in rows:
            self.last_position = row.position
            if row.role == Message.Role.TOOL:
                answered = [k for k, v in self.open_calls.items() if _pk(v) == row.tool_call_id]
                for call_id in answered:
                    del self.open_calls[call_id]
                continue
            for call in getattr(row, "_prefetched_objects_cache", {}).get("tool_calls", ()):
                self.open_calls[call.call_id] = call
                self.used_call_ids.add(call.call_id)


def _pk(value: ToolCall | int) -> int:
    return value if isinstance(value, int) else value.pk


def get_history(*, conversation: Conversation) -> list[domain.ChatMessage]:
    """The conversation as the provider is sent it, oldest first, in one query.

    The messages are joined to their calls, so no query grows with the history.
    """
    return _history(conversation)[0]


_REPORT_FIELDS = ("prompt_tokens", "usage_estimated", "model_call__first_position")
"""Read with a bounded history: an answer's reported input tokens and its call's first position."""


def _bound(conversation: Conversation, within: int) -> Coalesce:
    """The position a bounded read starts at: the oldest user message from which the stored
    estimates to the end add up to at most ``within``; else the last user message; else 0.

    One window sum over the conversation's ``(conversation, position)`` index, evaluated
    inside the read's own statement.
    """
    mine = Message.objects.filter(conversation=conversation)
    running = Window(Sum("token_estimate"), order_by=F("position").desc())
    # The role is tested on the window's result: a plain filter on it would be applied
    # before the sum, which would then add up the user messages alone.
    at_user = Case(When(role=domain.Role.USER.value, then=running), default=None)
    fits = (
        mine.annotate(at_user=at_user)
        .filter(at_user__lte=within)
        .order_by("position")
        .values("position")[:1]
    )
    last_user = (
        mine.filter(role=domain.Role.USER.value).order_by("-position").values("position")[:1]
    )
    return Coalesce(Subquery(fits), Subquery(last_user), Value(0))


def _history(
    conversation: Conversation, within: int | None = None
) -> tuple[list[domain.ChatMessage], TranscriptTail]:
    """The history and its tail; ``within`` (estimated tokens): only the newest messages that
    any view within that many tokens could send (see :func:`_bound`), with the report of the
    last answered call among them."""
    mine = Message.objects.filter(conversation=conversation)
    fields: tuple[str, ...] = _ROW_FIELDS
    if within is not None:
        mine = mine.filter(position__gte=_bound(conversation, within))
        fields = (*_ROW_FIELDS, *_REPORT_FIELDS)
    tail = TranscriptTail()
    rows = mine.order_by("position", "tool_calls__index", "attachment_links__position").values_list(
        *fields
    )
    answered: set[int] = set()
    calls: list[tuple[int, str]] = []
    history: list[domain.ChatMessage] = []
    message: tuple[Any, ...] | None = None
    own_calls: list[domain.ToolCall] = []
    own_parts: list[domain.FilePart] = []
    for row in rows:
        if message is None or message[0] != row[0]:
            if message is not None:
                history.append(_message(message, own_calls, own_parts))
            message, own_calls, own_parts = (*row[:6], row[7]), [], []
            if tail.last_position < 0:
                tail.first_position = row[1]
            tail.last_position = row[1]
            if row[6] is not None:
                answered.add(row[6])
            if within is not None and row[17] and not row[18] and row[19] is not None:
                tail.reported = Reported(row[17], row[19], row[1])
        attachment_id, media_type, file_name, size = row[13:17]
        if attachment_id is not None:
            own_parts.append(
                domain.FilePart(
                    media_type, b"", name=file_name, attachment_id=str(attachment_id), size=size
                )
            )
        call_pk, call_id, name, arguments, raw_arguments = row[8:13]
        if call_pk is not None:
            own_calls.append(
                domain.ToolCall(
                    id=call_id, name=name, arguments=arguments, raw_arguments=raw_arguments
                )
            )
            calls.append((call_pk, call_id))
    if message is not None:
        history.append(_message(message, own_calls, own_parts))
    for call_pk, call_id in calls:
        tail.used_call_ids.add(call_id)
        if call_pk not in answered:
            tail.open_calls[call_id] = call_pk
    return history, tail


def _message(
    row: tuple[Any, ...], calls: list[domain.ToolCall], parts: list[domain.FilePart]
) -> domain.ChatMessage:
    """``(id, position, role, content, is_error, provider_metadata, answered call id)`` as a value."""
    role, content, is_error, metadata, answered_call_id = row[2:]
    return domain.ChatMessage(
        domain.Role(role),
        content,
        tool_calls=tuple(calls) or None,
        tool_call_id=answered_call_id,
        is_error=is_error,
        provider_metadata=metadata or None,
        parts=tuple(parts),
    )


def history_for_provider(
    *, conversation: Conversation, profile: Profile | None
) -> list[domain.ChatMessage]:
    """Exactly the messages a provider is sent: the profile's system prompt, then the history.

    The system prompt is configuration, not history: it is not stored in the
    conversation, so editing a profile changes what later turns are sent.
    """
    return history_and_tail(conversation=conversation, profile=profile)[0]


def history_read_bound(profile: Profile | None) -> int | None:
    """The stored estimates a run of ``profile`` must read (``None``: no context window, all)."""
    model = profile.language_model if profile is not None else None
    if profile is None or model is None or not model.context_window:
        return None
    output = profile.max_tokens or model.max_output_tokens or DEFAULT_OUTPUT_TOKENS
    family = provider_family(model.provider.adapter)
    return bound_for(context_window=model.context_window, max_output_tokens=output, family=family)


def history_and_tail(
    *,
    conversation: Conversation,
    profile: Profile | None,
    within: int | None = None,
    bounded: bool = False,
) -> tuple[list[domain.ChatMessage], TranscriptTail]:
    """:func:`history_for_provider` and the conversation's :class:`TranscriptTail`, same queries.

    ``within`` (estimated tokens; a run whose model has a context window): only the newest
    messages a view within that many tokens could send are read, from a whole turn on, in
    the same single query (the tail's ``first_position`` says where it starts).
    ``bounded``: ``within`` is the profile's (:func:`history_read_bound`).
    """
    if bounded and within is None:
        within = history_read_bound(profile)
    history, tail = _history(conversation, within)
    if profile is not None and profile.system_prompt:
        return [domain.ChatMessage.system(profile.system_prompt), *history], tail
    return history, tail


def transcript_tail(*, conversation: Conversation) -> TranscriptTail:
    """The conversation's :class:`TranscriptTail` without its history: two small queries.

    For a writer that only appends (a run started for a worker to execute):
    the last position, and the call ids with whether each is answered; no
    message text is read.
    """
    tail = TranscriptTail()
    last = Message.objects.filter(conversation=conversation).aggregate(last=Max("position"))
    if last["last"] is not None:
        tail.last_position = last["last"]
    answered = Message.objects.filter(tool_call=OuterRef("pk"))
    calls = (
        ToolCall.objects.filter(conversation=conversation)
        .annotate(answered=Exists(answered))
        .order_by("message__position", "index")
        .values_list("pk", "call_id", "answered")
    )
    for call_pk, call_id, is_answered in calls:
        tail.used_call_ids.add(call_id)
        if not is_answered:
            tail.open_calls[call_id] = call_pk
    return tail


def open_tool_calls(*, conversation: Conversation) -> list[ToolCall]:
    """The conversation's calls that no tool message answers yet, in call order."""
    answered = Message.objects.filter(tool_call=OuterRef("pk"))
    return list(
        ToolCall.objects.filter(conversation=conversation)
        .exclude(Exists(answered))
        .select_related("message")
        .order_by("message__position", "index")
    )
