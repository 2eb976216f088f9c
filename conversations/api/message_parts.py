"""The parts of a message in the API: its tool calls, the tools the provider ran itself for it,
and the sources it cites."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.domain import timing
from conversations.models import ProviderToolKind, ToolCallStatus

from .fields import NamedChoiceField

__all__ = ["CitationSerializer", "ProviderToolCallSerializer", "ToolCallSerializer"]


class ProviderToolCallSerializer(serializers.Serializer[Any]):
    """One call of a tool the provider ran itself while writing the turn."""

    kind = serializers.ChoiceField(choices=ProviderToolKind.choices)
    provider = serializers.CharField(help_text="The adapter that made the turn.")
    id = serializers.CharField(
        source="provider_call_id", help_text="The provider's id of the call (may be empty)."
    )
    status = serializers.CharField(help_text="As the provider reported it (completed, failed...).")
    query = serializers.CharField(help_text="What it searched for (empty for code).")
    code = serializers.CharField(help_text="The code it ran (empty for a search).")
    result_summary = serializers.CharField(help_text="A short account of the result.")


class CitationSerializer(serializers.Serializer[Any]):
    """A passage of the message's text and the source the provider backed it with."""

    start = serializers.IntegerField(
        source="start_offset", help_text="Offset of the passage in `content` (characters)."
    )
    end = serializers.IntegerField(source="end_offset", help_text="Offset just past it.")
    url = serializers.CharField()
    title = serializers.CharField()
    source_id = serializers.CharField(help_text="The provider's id of the source (may be empty).")


class ToolCallSerializer(serializers.Serializer[Any]):
    """One call an assistant message made."""

    id = serializers.CharField(source="call_id", help_text="The provider's call id.")
    pk = serializers.IntegerField(
        help_text="The call's own id: approve or reject it at `/tool-calls/{pk}/approve/`."
    )
    name = serializers.CharField()
    arguments = serializers.DictField(help_text="The decoded arguments (a JSON object).")
    raw_arguments = serializers.CharField(
        allow_null=True,
        help_text="The model's argument text when it was not a JSON object (never executed).",
    )
    status = NamedChoiceField(choices=ToolCallStatus.choices, component_name="ToolCallStatus")
    duration_ms = serializers.SerializerMethodField()
    agent_conversation = serializers.SerializerMethodField(
        help_text="On an agent call (`agent_<slug>`): the conversation the agent worked in "
        "(`GET /conversations/{id}/`); null otherwise."
    )

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_duration_ms(self, obj: Any) -> int | None:
        return timing.duration_ms(obj.started_at, obj.finished_at)

    @extend_schema_field(serializers.UUIDField(allow_null=True))
    def get_agent_conversation(self, obj: Any) -> str | None:
        # Annotated by the selectors that load calls for the API.
        found = getattr(obj, "agent_conversation_id", None)
        return None if found is None else str(found)
