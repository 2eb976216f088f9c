"""Reads of feedback and scores: the targets a user may judge, and what was said of them."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q, QuerySet

from conversations.models import Feedback, Message, Run, Score, ToolCall

__all__ = [
    "conversation_feedback",
    "feedback_on",
    "owned_message",
    "owned_run",
    "owned_tool_call",
    "run_scores",
]


def owned_message(*, user: Any, conversation_id: uuid.UUID, position: int) -> Message | None:
    """The message at ``position`` of one of ``user``'s conversations, else ``None``."""
    return (
        Message.objects.filter(
            conversation_id=conversation_id, conversation__owner=user, position=position
        )
        .only("pk", "role", "position", "conversation_id", "run_id")
        .first()
    )


def owned_tool_call(*, user: Any, tool_call_id: int) -> ToolCall | None:
    """The tool call ``tool_call_id`` of one of ``user``'s conversations, else ``None``."""
    return ToolCall.objects.filter(pk=tool_call_id, conversation__owner=user).first()


def owned_run(*, user: Any, run_id: uuid.UUID) -> Run | None:
    """The run ``run_id`` of one of ``user``'s conversations, else ``None``."""
    return Run.objects.filter(pk=run_id, conversation__owner=user).first()


def conversation_feedback(*, user: Any, conversation_id: uuid.UUID) -> QuerySet[Feedback]:
    """``user``'s feedback on the answers, calls and runs of one of their conversations.

    Each row comes with the position of the message it judges (``message``)
    and the call's ``pk`` (``tool_call``), so a page can put it back in place.
    """
    return (
        Feedback.objects.filter(user=user)
        .filter(
            Q(message__conversation_id=conversation_id)
            | Q(tool_call__conversation_id=conversation_id)
            | Q(run__conversation_id=conversation_id)
        )
        .select_related("message")
        .order_by("created_at", "pk")
    )


def feedback_on(*, user: Any, target: Message | ToolCall | Run) -> Feedback | None:
    """``user``'s feedback on ``target``, else ``None``."""
    rows = Feedback.objects.filter(user=user).select_related("message")
    if isinstance(target, Message):
        return rows.filter(message=target).first()
    if isinstance(target, ToolCall):
        return rows.filter(tool_call=target).first()
    return rows.filter(run=target).first()


def run_scores(*, run: Run) -> QuerySet[Score]:
    """The scores given to ``run`` and to its messages, oldest first."""
    return Score.objects.filter(Q(run=run) | Q(message__run=run)).order_by("created_at", "pk")
