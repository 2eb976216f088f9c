"""Approval of tool calls: the policy, holding a turn, and the calls of a resumed turn.

The policy (:func:`approval_required`): the most specific setting wins, a
profile's ``approval``, then the tool's ``ToolSetting.approval``, then its
``@tool(requires_approval=...)``. A turn with any call that needs approval is
held whole (:func:`hold_turn`): every call waits ``awaiting_approval``, one
:class:`~conversations.models.ToolApproval` per call that needs a decision
records the SHA-256 of its arguments, and the run waits ``awaiting_approval``
holding no process. Deciding lives in ``decisions``; when the run resumes,
:func:`held_calls` says what becomes of each call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.utils import timezone

from conversations import signals
from conversations.conf import app_settings
from conversations.models import ApprovalPolicy, Profile, Run, ToolApproval, ToolSetting
from conversations.models import ToolCall as ToolCallRow
from conversations.selectors import ToolSettings
from conversations.tools import Tool

from .tool_calls import (
    ARGUMENTS_CHANGED,
    CallOutcome,
    check_call,
    rejected_by_reviewer_text,
    tool_error_text,
)

__all__ = [
    "approval_levels",
    "approval_required",
    "arguments_digest",
    "held_calls",
    "hold_turn",
    "resolve_approval_level",
    "send_requested",
]

_LEVEL_OF_POLICY: dict[str, str | None] = {
    ApprovalPolicy.ALWAYS: ToolApproval.Level.OWNER,
    ApprovalPolicy.STAFF: ToolApproval.Level.STAFF,
    ApprovalPolicy.NEVER: None,
}


def _declared_level(tool: Tool) -> str | None:
    if tool.requires_approval == "staff":
        return ToolApproval.Level.STAFF
    return ToolApproval.Level.OWNER if tool.requires_approval is True else None


def resolve_approval_level(
    *, profile: Profile | None, setting: str | None, tool: Tool
) -> str | None:
    """The level that applies given the profile, the tool's setting (``approval``) and the tool."""
    for policy in (profile.approval if profile else None, setting):
        if policy is not None and policy != ApprovalPolicy.DEFAULT:
            return _LEVEL_OF_POLICY[policy]
    return _declared_level(tool)


def approval_levels(
    *, profile: Profile | None, tools: Iterable[Tool], settings: ToolSettings | None = None
) -> dict[str, str]:
    """Who must approve each of ``tools``' calls (``owner`` or ``staff``); unlisted: nobody.

    ``settings``: the tool settings as the caller has just read them. Without
    them, one query reads them, none when the profile decides for all.
    """
    tools = list(tools)
    policies: Mapping[str, str] = {} if settings is None else settings.approvals
    if settings is None and (profile is None or profile.approval == ApprovalPolicy.DEFAULT):
        policies = dict(
            ToolSetting.objects.filter(name__in=[t.name for t in tools])
            .exclude(approval=ApprovalPolicy.DEFAULT)
            .values_list("name", "approval")
        )
    levels = {
        tool.name: resolve_approval_level(
            profile=profile, setting=policies.get(tool.name), tool=tool
        )
        for tool in tools
    }
    return {name: level for name, level in levels.items() if level is not None}


def approval_required(*, profile: Profile | None, tool: Tool) -> str | None:
    """Who must approve a call of ``tool`` under ``profile``: ``"owner"``, ``"staff"`` or ``None``."""
    return approval_levels(profile=profile, tools=[tool]).get(tool.name)


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``arguments`` (sorted keys, no spaces)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def hold_turn(
    *, run: Run, rows: Sequence[ToolCallRow], levels: Mapping[int, str]
) -> list[ToolApproval]:
    """Hold a whole turn for approval; call inside the transaction that stores the turn.

    Every call of ``rows`` becomes ``awaiting_approval``, each call whose
    primary key is in ``levels`` gets its approval row at that level, and the run becomes ``awaiting_approval``,
    unclaimed (no process holds it while it waits).
    """
    now = timezone.now()
    timeout = app_settings().APPROVAL_TIMEOUT_SECONDS
    expires = now + timedelta(seconds=timeout) if timeout else None
    ToolCallRow.objects.filter(pk__in=[row.pk for row in rows]).update(
        status=ToolCallRow.Status.AWAITING_APPROVAL
    )
    for row in rows:
        row.status = ToolCallRow.Status.AWAITING_APPROVAL
    approvals = ToolApproval.objects.bulk_create(
        ToolApproval(
            tool_call=row,
            run=run,
            level=levels[row.pk],
            arguments_digest=arguments_digest(row.arguments),
            expires_at=expires,
        )
        for row in rows
        if row.pk in levels
    )
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.AWAITING_APPROVAL, claimed_at=None, worker="", heartbeat_at=now
    )
    run.status, run.claimed_at, run.worker = Run.Status.AWAITING_APPROVAL, None, ""
    return approvals


def send_requested(*, run: Run, approvals: Iterable[ToolApproval]) -> None:
    """Tell receivers of ``approval_requested`` (after the held turn is committed)."""
    for approval in approvals:
        signals.approval_requested.send(sender=ToolApproval, approval=approval, run=run)


def held_calls(
    *, run: Run, tools: Mapping[str, Tool]
) -> list[tuple[ToolCallRow, CallOutcome | None]]:
    """The held turn of a resumed run: each call with its answer (``None``: it may run).

    A rejected call is answered with the reviewer's words, an approved call
    whose arguments no longer match their digest is not run, and every other
    call is checked as in any turn.
    """
    rows = list(
        ToolCallRow.objects.filter(
            conversation_id=run.conversation_id,
            status=ToolCallRow.Status.AWAITING_APPROVAL,
        )
        .select_related("approval")
        .order_by("message__position", "index")
    )
    checked: list[tuple[ToolCallRow, CallOutcome | None]] = []
    for row in rows:
        approval: ToolApproval | None = getattr(row, "approval", None)
        outcome: CallOutcome | None
        if approval is not None and approval.decision == ToolApproval.Decision.REJECTED:
            text = rejected_by_reviewer_text(row.name, approval.reason)
            outcome = CallOutcome(row, ToolCallRow.Status.REJECTED, text)
        elif approval is not None and approval.arguments_digest != arguments_digest(row.arguments):
            text = tool_error_text(ARGUMENTS_CHANGED, row.name)
            outcome = CallOutcome(row, ToolCallRow.Status.REJECTED, text)
        else:
            outcome = check_call(row=row, tools=tools)
        checked.append((row, outcome))
    return checked
