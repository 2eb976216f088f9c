"""Reads of tool call approvals: which ones a user may see and decide."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from conversations.models import Run, ToolApproval, ToolCall

__all__ = [
    "APPROVE_PERMISSION",
    "decidable_approvals",
    "owned_tool_call_exists",
    "tool_call_approval",
    "visible_approvals",
]

APPROVE_PERMISSION = "conversations.approve_toolcall"
"""The permission that lets a user decide staff-level approvals of other users' calls."""


def visible_approvals(*, user: Any) -> QuerySet[ToolApproval]:
    """Approvals ``user`` may see: those of their conversations, and staff-level ones of
    other users' conversations when they hold the approve permission."""
    mine = Q(run__conversation__owner=user)
    if user.has_perm(APPROVE_PERMISSION):
        mine |= Q(level=ToolApproval.Level.STAFF)
    return ToolApproval.objects.filter(mine).select_related(
        "tool_call", "run__conversation", "decided_by"
    )


def decidable_approvals(*, user: Any) -> QuerySet[ToolApproval]:
    """Pending approvals of waiting runs that ``user`` may decide, oldest first."""
    owner_level = Q(level=ToolApproval.Level.OWNER, run__conversation__owner=user)
    allowed = owner_level
    if user.has_perm(APPROVE_PERMISSION):
        allowed |= Q(level=ToolApproval.Level.STAFF) & ~Q(run__conversation__owner=user)
    return (
        ToolApproval.objects.filter(allowed, decision="", run__status=Run.Status.AWAITING_APPROVAL)
        .select_related("tool_call", "run__conversation", "decided_by")
        .order_by("requested_at", "id")
    )


def tool_call_approval(*, user: Any, tool_call_id: int) -> ToolApproval | None:
    """The approval of the call ``tool_call_id`` if ``user`` may see it, else ``None``."""
    return visible_approvals(user=user).filter(tool_call_id=tool_call_id).first()


def owned_tool_call_exists(*, user: Any, tool_call_id: int) -> bool:
    """Whether the call ``tool_call_id`` is in one of ``user``'s conversations."""
    return ToolCall.objects.filter(pk=tool_call_id, conversation__owner=user).exists()
