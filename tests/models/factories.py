"""Rows built with the ORM for rule tests (the ORM path the rules must also allow)."""

from __future__ import annotations

from conversations.models import Message, ToolCall


def add_message(conversation, position, role, **fields):
    return Message.objects.create(conversation=conversation, position=position, role=role, **fields)


def add_call(message, index=0, call_id="call_1", name="get_weather", **fields):
    return ToolCall.objects.create(
        message=message,
        conversation_id=message.conversation_id,
        index=index,
        call_id=call_id,
        name=name,
        **fields,
    )
