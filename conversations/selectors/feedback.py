"""Reads of feedback and scores: the targets a user may judge, and what was said of them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db.models import Count, F, Q, QuerySet
from django.db.models.functions import Coalesce, TruncDate

from conversations.models import Feedback, Message, Profile, Run, Score, ToolCall

__all__ = [
    "FeedbackRate",
    "conversation_feedback",
    "feedback_on",
    "feedback_rates",
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


@dataclass(frozen=True, slots=True)
class FeedbackRate:
    """Ups and downs of one group (a day, a profile, a model or a tool)."""

    key: str
    """The day (ISO), the profile's slug, the model or the tool's name; empty for none."""
    up: int
    down: int
    ref: Any = None
    """The profile's pk, where the group is a profile (for links)."""

    @property
    def total(self) -> int:
        return self.up + self.down

    @property
    def share_up(self) -> float | None:
        """The share of ups, from 0 to 1; ``None`` without feedback."""
        return self.up / self.total if self.total else None


_GROUPS = {
    "day": TruncDate("updated_at"),
    "profile": Coalesce(
        "message__conversation__profile__slug",
        "tool_call__conversation__profile__slug",
        "run__conversation__profile__slug",
    ),
    "model": Coalesce("message__model", "tool_call__message__model", "run__model"),
    "tool": F("tool_call__name"),
}


def feedback_rates(*, since: datetime, until: datetime, group_by: str) -> list[FeedbackRate]:
    """Ups and downs given between ``since`` and ``until``, per ``group_by`` (one query).

    ``group_by`` is ``day``, ``profile``, ``model`` (of the judged answer, the
    call's message or the run) or ``tool`` (feedback on tool calls only).
    Groups with the most feedback come first; days come in order.
    """
    rows = Feedback.objects.filter(updated_at__gte=since, updated_at__lt=until)
    if group_by == "tool":
        rows = rows.filter(tool_call__isnull=False)
    expression = _GROUPS[group_by]
    grouped = (
        rows.annotate(group=expression)
        .values("group")
        .annotate(up=Count("pk", filter=Q(value=1)), down=Count("pk", filter=Q(value=-1)))
        .order_by()
    )
    refs: dict[str, Any] = {}
    if group_by == "profile":
        refs = dict(Profile.objects.values_list("slug", "pk"))
    found = [
        FeedbackRate(
            key=row["group"].isoformat() if isinstance(row["group"], date) else row["group"] or "",
            up=row["up"],
            down=row["down"],
            ref=refs.get(row["group"]) if group_by == "profile" else None,
        )
        for row in grouped
    ]
    if group_by == "day":
        return sorted(found, key=lambda rate: rate.key)
    return sorted(found, key=lambda rate: (-rate.total, rate.key))
