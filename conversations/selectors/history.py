"""The history: stored rows turned into the domain's value objects, in constant queries."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Exists, OuterRef

from conversations import domain
from conversations.models import Conversation, Message, Profile, ToolCall

__all__ = [
    "TranscriptTail",
    "get_history",
    "history_and_tail",
    "history_for_provider",
    "message_to_domain",
    "open_tool_calls",
    "tool_call_to_domain",
]

_MESSAGE_FIELDS = (
    "id",
    "position",
    "role",
    "content",
    "is_error",
    "provider_metadata",
    "tool_call__call_id",
)
_CALL_FIELDS = ("id", "message_id", "index", "call_id", "name", "arguments", "raw_arguments")


def tool_call_to_domain(call: ToolCall) -> domain.ToolCall:
    """One stored call as the value object (the provider's id, name and arguments)."""
    return domain.ToolCall(
        id=call.call_id,
        name=call.name,
        arguments=call.arguments,
        raw_arguments=call.raw_arguments,
    )


def message_to_domain(
    message: Message, *, calls: Iterable[ToolCall] | None = None
) -> domain.ChatMessage:
    """One stored message as a :class:`~conversations.domain.ChatMessage`.

    ``calls`` are the message's tool calls in order; when omitted they are read
    from ``message.tool_calls.all()`` (prefetch them when mapping many). A tool
    message reads ``message.tool_call`` (``select_related`` it).
    """
    role = domain.Role(message.role)
    tool_calls: tuple[domain.ToolCall, ...] | None = None
    tool_call_id: str | None = None
    if role is domain.Role.ASSISTANT:
        if calls is None:
            calls = message.tool_calls.all()
        tool_calls = tuple(tool_call_to_domain(call) for call in calls) or None
    elif role is domain.Role.TOOL:
        # A constraint gives every tool message the call it answers.
        assert message.tool_call is not None
        tool_call_id = message.tool_call.call_id
    return domain.ChatMessage(
        role,
        message.content,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        is_error=message.is_error,
        provider_metadata=message.provider_metadata or None,
    )


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
    """Every call id of the conversation (they are unique per conversation)."""

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
    """The conversation as the provider is sent it, oldest first, in two queries.

    The calls are read by their (denormalised) conversation, not by message ids,
    so no query grows with the history.
    """
    return _history(conversation)[0]


def _history(conversation: Conversation) -> tuple[list[domain.ChatMessage], TranscriptTail]:
    messages = list(
        Message.objects.filter(conversation=conversation)
        .select_related("tool_call")
        .only(*_MESSAGE_FIELDS)
        .order_by("position")
    )
    calls_by_message: dict[int, list[ToolCall]] = defaultdict(list)
    tail = TranscriptTail(last_position=messages[-1].position if messages else -1)
    answered = {message.tool_call_id for message in messages if message.tool_call_id}
    calls = ToolCall.objects.filter(conversation=conversation).only(*_CALL_FIELDS)
    for call in calls.order_by("message_id", "index"):
        calls_by_message[call.message_id].append(call)
        tail.used_call_ids.add(call.call_id)
        if call.pk not in answered:
            tail.open_calls[call.call_id] = call.pk
    history = [
        message_to_domain(message, calls=calls_by_message.get(message.pk, ()))
        for message in messages
    ]
    return history, tail


def history_for_provider(
    *, conversation: Conversation, profile: Profile | None
) -> list[domain.ChatMessage]:
    """Exactly the messages a provider is sent: the profile's system prompt, then the history.

    The system prompt is configuration, not history: it is not stored in the
    conversation, so editing a profile changes what later turns are sent.
    """
    return history_and_tail(conversation=conversation, profile=profile)[0]


def history_and_tail(
    *, conversation: Conversation, profile: Profile | None
) -> tuple[list[domain.ChatMessage], TranscriptTail]:
    """:func:`history_for_provider` and the conversation's :class:`TranscriptTail`, same queries."""
    history, tail = _history(conversation)
    if profile is not None and profile.system_prompt:
        return [domain.ChatMessage.system(profile.system_prompt), *history], tail
    return history, tail


def open_tool_calls(*, conversation: Conversation) -> list[ToolCall]:
    """The conversation's calls that no tool message answers yet, in call order."""
    answered = Message.objects.filter(tool_call=OuterRef("pk"))
    return list(
        ToolCall.objects.filter(conversation=conversation)
        .exclude(Exists(answered))
        .select_related("message")
        .order_by("message__position", "index")
    )
