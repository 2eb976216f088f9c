"""Deciding tool call approvals, and resuming the run once its last approval is decided.

A decision is one locked, conditional write: the run is locked first (so
two decisions on one turn are serialised and exactly one of them sees the
last pending approval go), then the approval, which must still be pending.
The decision that leaves no approval of the run pending also moves the run
back to ``running``, unclaimed, in the same transaction; the executor then
claims it exactly once (``claim_run``) and the loop answers the held turn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from conversations import signals
from conversations.exceptions import ApprovalAlreadyDecided, ApprovalForbidden
from conversations.models import Run, ToolApproval
from conversations.providers.base import ChatProvider
from conversations.selectors.approvals import APPROVE_PERMISSION

from ..loop.executors import resume_parent, submit_run
from ..loop.tool_loop import execute_run

__all__ = [
    "APPROVE_PERMISSION",
    "TIMED_OUT",
    "Decision",
    "can_decide",
    "decide_approval",
    "expire_approvals",
]

logger = logging.getLogger("conversations.approvals")

TIMED_OUT = "approval timed out"
"""The reason stored on an approval that expired."""


@dataclass(frozen=True, slots=True)
class Decision:
    """A stored decision and what it did to the run."""

    approval: ToolApproval
    """The decided approval."""
    run: Run
    """Its run, as it is after the decision (and after an inline resume, finished)."""
    resumed: bool
    """Whether this decision was the turn's last and handed the run to the executor."""


def can_decide(*, approval: ToolApproval, user: Any) -> bool:
    """Whether ``user`` may decide ``approval``.

    An ``owner`` approval: the conversation's owner. A ``staff`` approval: a
    holder of ``conversations.approve_toolcall`` who does not own the conversation.
    """
    owner_id = approval.run.conversation.owner_id
    if approval.level == ToolApproval.Level.OWNER:
        return bool(user.pk == owner_id)
    return bool(user.pk != owner_id and user.has_perm(APPROVE_PERMISSION))


def decide_approval(
    *,
    approval: ToolApproval,
    user: Any | None,
    approved: bool,
    reason: str = "",
    provider: ChatProvider | None = None,
) -> Decision:
    """Store a decision on a pending approval and resume the run if it was the last one.

    ``user`` ``None`` is the system (a timeout). Raises :class:`ApprovalForbidden`
    when ``user`` may not decide it, :class:`ApprovalAlreadyDecided` when it
    was decided before (also by a concurrent request). The reason is kept only
    for a rejection (it is what the model is told). ``provider`` (as for
    ``run_tool_loop``) executes a resumed run here with that provider instead
    of handing it to the configured executor.
    """
    if user is not None and not can_decide(approval=approval, user=user):
        if approval.level == ToolApproval.Level.OWNER:
            raise ApprovalForbidden("only the conversation's owner may decide this call")
        raise ApprovalForbidden(
            "only a holder of the approve permission, not the conversation's owner, "
            "may decide this call"
        )
    resumed = _store_decision(
        approval=approval, user=user, approved=approved, reason=reason, now=timezone.now()
    )
    run = approval.run
    signals.approval_decided.send(sender=ToolApproval, approval=approval, run=run)
    if resumed:
        logger.info("run %s resumes after its last approval was decided", run.pk)
        if provider is not None:
            execute_run(run=run, provider=provider)
            resume_parent(run)  # an agent's run: the run that waits for it goes on
        else:
            submit_run(run)
        run.refresh_from_db()
    return Decision(approval, run, resumed)


def _store_decision(
    *, approval: ToolApproval, user: Any | None, approved: bool, reason: str, now: datetime
) -> bool:
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=approval.run_id)
        locked = ToolApproval.objects.select_for_update().get(pk=approval.pk)
        if locked.decision:
            raise ApprovalAlreadyDecided(f"this call was already {locked.get_decision_display()}")
        locked.decision = (
            ToolApproval.Decision.APPROVED if approved else ToolApproval.Decision.REJECTED
        )
        locked.decided_by = user
        locked.decided_at = now
        locked.reason = "" if approved else reason.strip()
        locked.save(update_fields=["decision", "decided_by", "decided_at", "reason"])
        approval.decision, approval.decided_by = locked.decision, locked.decided_by
        approval.decided_at, approval.reason = locked.decided_at, locked.reason
        if run.status != Run.Status.AWAITING_APPROVAL:
            return False
        if ToolApproval.objects.filter(run=run, decision="").exists():
            return False
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.RUNNING, claimed_at=None, worker="", heartbeat_at=now
        )
    approval.run.refresh_from_db()
    return True


def expire_approvals(*, now: datetime | None = None) -> list[Decision]:
    """Reject every pending approval past its ``expires_at`` (reason ``approval timed out``).

    Runs whose last approval this decides resume. An approval decided
    meanwhile by someone else is skipped.
    """
    now = now or timezone.now()
    expired = ToolApproval.objects.filter(
        decision="", expires_at__lt=now, run__status=Run.Status.AWAITING_APPROVAL
    ).select_related("run__conversation")
    decisions: list[Decision] = []
    for approval in expired:
        try:
            decisions.append(
                decide_approval(approval=approval, user=None, approved=False, reason=TIMED_OUT)
            )
        except ApprovalAlreadyDecided:
            continue
    return decisions
