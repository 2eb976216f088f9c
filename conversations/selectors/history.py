"""The history: stored rows turned into the domain's value objects, in constant queries."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db.models import Exists, OuterRef

from conversations import domain
from conversations.models import Conversation, Message, Profile, ToolCall

__all__ = [
    "get_history",
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


def get_history(*, conversation: Conversation) -> list[domain.ChatMessage]:
    """The conversation as the provider is sent it, oldest first, in two queries.

    The calls are read by their (denormalised) conversation, not by message ids,
    so no query grows with the history.
    """
    messages = list(
        Message.objects.filter(conversation=conversation)
        .select_related("tool_call")
        .only(*_MESSAGE_FIELDS)
        .order_by("position")
    )
    calls_by_message: dict[int, list[ToolCall]] = defaultdict(list)
    for call in (
        ToolCall.objects.filter(conversation=conversation)
        .only(*_CALL_FIELDS)
        .order_by("message_id", "index")
    ):
        calls_by_message[call.message_id].append(call)
    return [
        message_to_domain(message, calls=calls_by_message.get(message.pk, ()))
        for message in messages
    ]


def history_for_provider(
    *, conversation: Conversation, profile: Profile | None
) -> list[domain.ChatMessage]:
    """Exactly the messages a provider is sent: the profile's system prompt, then the history.

    The system prompt is configuration, not history: it is not stored in the
    conversation, so editing a profile changes what later turns are sent.
    """
    history = get_history(conversation=conversation)
    if profile is not None and profile.system_prompt:
        return [domain.ChatMessage.system(profile.system_prompt), *history]
    return history


def open_tool_calls(*, conversation: Conversation) -> list[ToolCall]:
    """The conversation's calls that no tool message answers yet, in call order."""
    answered = Message.objects.filter(tool_call=OuterRef("pk"))
    return list(
        ToolCall.objects.filter(conversation=conversation)
        .exclude(Exists(answered))
        .select_related("message")
        .order_by("message__position", "index")
    )
