"""Human approval of tool calls: one row per call that waits for a decision."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact

from .transcript import Run, ToolCall

__all__ = ["ApprovalDecision", "ApprovalLevel", "ToolApproval"]


class ApprovalLevel(models.TextChoices):
    """Who may decide: the conversation's owner, or a holder of the approve permission."""

    OWNER = "owner", "Owner"
    STAFF = "staff", "Staff"


class ApprovalDecision(models.TextChoices):
    """A decision; empty while the approval is pending."""

    PENDING = "", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class ToolApproval(models.Model):
    """The decision one tool call waits for, bound to the call's exact arguments.

    Database rules (migration ``0007_approvals``): a call with an approval that
    is pending or rejected cannot become ``running`` or ``succeeded``, and a
    decided approval never changes.
    """

    Level = ApprovalLevel
    Decision = ApprovalDecision

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="approval")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    level = models.CharField(max_length=16, choices=ApprovalLevel)
    arguments_digest = models.CharField(
        max_length=64,
        help_text="SHA-256 (hex) of the call's canonical arguments JSON when approval was asked.",
    )
    decision = models.CharField(max_length=16, choices=ApprovalDecision, default="", blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty on a decided approval: the system decided (timeout, cancellation).",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    requested_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["requested_at", "id"]
        permissions = [("approve_toolcall", "Can decide staff-level tool call approvals")]
        indexes = [
            models.Index(fields=["decision", "requested_at"], name="conversations_approval_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(level__in=ApprovalLevel.values),
                name="conversations_toolapproval_level_valid",
            ),
            models.CheckConstraint(
                condition=Q(decision__in=ApprovalDecision.values),
                name="conversations_toolapproval_decision_valid",
            ),
            models.CheckConstraint(
                condition=Q(decision="", decided_at__isnull=True, decided_by__isnull=True)
                | (~Q(decision="") & Q(decided_at__isnull=False)),
                name="conversations_toolapproval_decided_at",
                violation_error_message="A decided approval has a time; a pending one has none.",
            ),
            models.CheckConstraint(
                condition=Q(decision="rejected") | Q(reason=""),
                name="conversations_toolapproval_reason_on_rejection",
            ),
            models.CheckConstraint(
                condition=Exact(Length("arguments_digest"), 64),
                name="conversations_toolapproval_digest_sha256",
            ),
        ]

    def __str__(self) -> str:
        return f"approval of {self.tool_call_id} ({self.decision or 'pending'})"
