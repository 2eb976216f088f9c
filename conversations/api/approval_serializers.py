"""How the API shows an approval: the decision one tool call waits for, or received.

Shared by the approval endpoints and the run's event stream (its
``approval.requested`` events carry the same body).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.models import ApprovalDecision, ApprovalLevel, Run, ToolApproval
from conversations.tools import registry

from .message_parts import ToolCallSerializer
from .schema import NamedChoiceField

__all__ = ["AgentStepSerializer", "ApprovalSerializer"]


class AgentStepSerializer(serializers.Serializer[Any]):
    """One run on the way from the first run down to an agent's call that waits."""

    run = serializers.UUIDField()
    conversation = serializers.UUIDField()
    profile = serializers.CharField(allow_null=True)
    agent_call = serializers.CharField(
        allow_null=True, help_text="The agent call this run made to start the next one."
    )


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
    agent_chain = serializers.SerializerMethodField(
        help_text="When the call is an agent's (its run was started by another run's agent "
        "call): the runs from the first down to this one, each with its profile and the "
        "agent call it made on the way down (null on the last); empty otherwise."
    )

    @extend_schema_field(AgentStepSerializer(many=True))
    def get_agent_chain(self, obj: ToolApproval) -> list[dict[str, Any]]:
        run = obj.run
        if run.parent_run_id is None:
            return []  # no query for the approvals of a run of its own
        steps: list[dict[str, Any]] = []
        call: str | None = None
        current: Run | None = run
        while current is not None:
            steps.append(
                {
                    "run": str(current.pk),
                    "conversation": str(current.conversation_id),
                    "profile": current.profile.slug if current.profile else None,
                    "agent_call": call,
                }
            )
            parent_call = current.conversation.parent_tool_call
            call = parent_call.name if parent_call is not None else None
            current = current.parent_run
        return steps[::-1]

    def get_description(self, obj: ToolApproval) -> str:
        """What the tool does (as the model was told), so the approver knows what runs."""
        tool = registry.get(obj.tool_call.name)
        return tool.description if tool is not None else ""
