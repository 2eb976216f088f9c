"""How the API shows an approval: the decision one tool call waits for, or received.

Shared by the approval endpoints and the run's event stream (its
``approval.requested`` events carry the same body).
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from conversations.models import ApprovalDecision, ApprovalLevel, ToolApproval
from conversations.tools import registry

from .message_parts import ToolCallSerializer
from .schema import NamedChoiceField

__all__ = ["ApprovalSerializer"]


class ApprovalSerializer(serializers.Serializer[Any]):
    """The decision one tool call waits for (or received)."""

    tool_call = ToolCallSerializer()
    description = serializers.SerializerMethodField()
    conversation = serializers.UUIDField(source="run.conversation_id")
    run = serializers.UUIDField(source="run_id")
    level = NamedChoiceField(choices=ApprovalLevel.choices, component_name="ApprovalLevel")
    arguments_digest = serializers.CharField(
        help_text="SHA-256 of the call's canonical arguments JSON when approval was asked."
    )
    decision = NamedChoiceField(
        choices=ApprovalDecision.choices,
        component_name="ApprovalDecision",
        help_text="Empty while pending.",
    )
    decided_by = serializers.CharField(
        source="decided_by.get_username",
        allow_null=True,
        help_text="Who decided; null while pending or when the system decided.",
    )
    decided_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField()
    requested_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)

    def get_description(self, obj: ToolApproval) -> str:
        """What the tool does (as the model was told), so the approver knows what runs."""
        tool = registry.get(obj.tool_call.name)
        return tool.description if tool is not None else ""
