"""The parts of a message in the API: its tool calls, the tools the provider ran itself for it,
and the sources it cites; and the shape of a message an import takes.

The import's shapes (``Imported*``, ``ImportMessage``) document the body of
``POST /conversations/import/`` only: the domain validates it
(``ChatMessage.from_dict``, ``services.history.imported_activity``), so its
errors are the domain's codes with pointers into the body.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.domain import timing
from conversations.domain.provider_tools import SUMMARY_LIMIT
from conversations.domain.storable import MAX_NAME_LENGTH
from conversations.models import Message, ProviderToolKind, ToolCallStatus

from .fields import NamedChoiceField

__all__ = [
    "CitationSerializer",
    "ImportMessageSerializer",
    "ImportedCitationSerializer",
    "ImportedProviderToolCallSerializer",
    "ProviderToolCallSerializer",
    "ToolCallSerializer",
]


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


# The import's shapes (documentation: see the module's docstring) ------------------------------


class ImportedProviderToolCallSerializer(serializers.Serializer[Any]):
    """A tool the provider ran itself, on an imported assistant message (as the export writes it).

    Other keys are refused (`unknown_field`)."""

    kind = serializers.ChoiceField(choices=ProviderToolKind.choices)
    provider = serializers.CharField(max_length=32, help_text="The adapter that made the turn.")
    id = serializers.CharField(
        max_length=MAX_NAME_LENGTH, required=False, allow_blank=True, default=""
    )
    status = serializers.CharField(max_length=32)
    query = serializers.CharField(required=False, allow_blank=True, default="")
    code = serializers.CharField(required=False, allow_blank=True, default="")
    result_summary = serializers.CharField(
        max_length=SUMMARY_LIMIT, required=False, allow_blank=True, default=""
    )


class ImportedCitationSerializer(serializers.Serializer[Any]):
    """A source an imported assistant message cites (as the export writes it).

    `0 <= start <= end <= len(content)`; other keys are refused (`unknown_field`)."""

    start = serializers.IntegerField(min_value=0, help_text="Offset in `content` (characters).")
    end = serializers.IntegerField(min_value=0, help_text="Offset just past the passage.")
    url = serializers.CharField()
    title = serializers.CharField(required=False, allow_blank=True, default="")
    source_id = serializers.CharField(
        max_length=MAX_NAME_LENGTH, required=False, allow_blank=True, default=""
    )


class ImportMessageSerializer(serializers.Serializer[Any]):
    """One imported message: the Chat Completions shape, plus what the export adds."""

    role = serializers.ChoiceField(choices=Message.Role.choices)
    content = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="Text, or an array of content parts; null on an assistant turn with calls.",
    )
    tool_calls = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="On an assistant message: `{id, type, function: {name, arguments}}`, "
        "arguments as JSON text or an object.",
    )
    tool_call_id = serializers.CharField(
        required=False, help_text="On a tool message: the call it answers."
    )
    is_error = serializers.BooleanField(
        required=False, help_text="On a tool message: the result reports a failure."
    )
    attachments = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        allow_null=True,
        help_text="On a user or tool message: `{id, sha256}` references to your attachments.",
    )
    provider_tool_calls = ImportedProviderToolCallSerializer(
        many=True,
        required=False,
        allow_null=True,
        help_text="On an assistant message: the tools the provider ran itself (at most 100).",
    )
    citations = ImportedCitationSerializer(
        many=True,
        required=False,
        allow_null=True,
        help_text="On an assistant message: the sources it cites, by span (at most 500).",
    )
