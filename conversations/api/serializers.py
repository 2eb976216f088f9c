"""Request and response bodies of the API.

Requests are validated here; responses are read from rows fetched with their
relations and annotations (see ``views.py``), so serialising a page never
queries. Input and output shapes are separate classes so the OpenAPI schema
names each (``ConversationInput`` vs ``Conversation``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from conversations.conf import app_settings
from conversations.domain import USAGE_FIELDS, timing
from conversations.models import (
    TITLE_MAX_LENGTH,
    Message,
    Run,
    RunStatus,
)

from .agent_serializers import RunTreeSerializer
from .attachment_serializers import AttachmentReferencesField
from .context_view import ContextViewField
from .errors import APIError, error_item
from .fields import JSONObjectField, NamedChoiceField, ProfileSlugField, check_storable
from .message_parts import (
    CitationSerializer,
    ImportMessageSerializer,
    ProviderToolCallSerializer,
    ToolCallSerializer,
)

__all__ = [
    "ConversationInputSerializer",
    "ConversationListQuerySerializer",
    "ConversationSerializer",
    "ErrorSerializer",
    "ImportInputSerializer",
    "MessageInputSerializer",
    "MessageListQuerySerializer",
    "MessageSerializer",
    "PostMessageResultSerializer",
    "QueuedRunSerializer",
    "RunFailureSerializer",
    "RunSerializer",
]

MAX_IMPORT_MESSAGES = 1000
"""Most messages one import may hold."""

_ROLES = [choice[0] for choice in Message.Role.choices]

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _AssistantMessages(TypedDict):
    """What the run views prefetch onto each run (``Prefetch(to_attr=...)``)."""

    assistant_messages: list[Message]


# Errors ------------------------------------------------------------------------------


class ErrorItemSerializer(serializers.Serializer[Any]):
    """One located problem."""

    pointer = serializers.CharField(
        allow_null=True,
        help_text='RFC 6901 pointer into the request body, e.g. "/messages/3/tool_call_id" '
        '("" is the whole body); null when the problem is not in the body.',
    )
    parameter = serializers.CharField(
        allow_null=True, help_text="The query parameter at fault; null otherwise."
    )
    code = serializers.CharField()
    detail = serializers.CharField()


class ErrorSerializer(serializers.Serializer[Any]):
    """Every error answer of the API."""

    code = serializers.CharField(help_text="Stable machine-readable code.")
    detail = serializers.CharField(help_text="Human-readable explanation.")
    # DRF's metaclass moves declared fields off the class, so this does not
    # shadow ``Serializer.errors`` at runtime; the stubs cannot know that.
    errors = ErrorItemSerializer(many=True)  # type: ignore[assignment]


# Tool calls, usage -------------------------------------------------------------------


class UsageSerializer(serializers.Serializer[Any]):
    """Token counts."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # The counts of the domain's ``Usage``, so none can be left out of the API.
        fields: dict[str, serializers.Field[Any, Any, Any, Any]] = {
            name: serializers.IntegerField(allow_null=True) for name in USAGE_FIELDS
        }
        fields["estimated"] = serializers.BooleanField(
            help_text="The counts are an estimate from the text (about 4 characters a token): "
            "the provider reported none because the answer was stopped, cut at a deadline or "
            "broke off."
        )
        return fields


def _usage(obj: Any) -> dict[str, int | bool | None] | None:
    values: dict[str, int | bool | None] = {name: getattr(obj, name) for name in USAGE_FIELDS}
    if all(value is None for value in values.values()):
        return None
    values["estimated"] = obj.usage_estimated
    return values


# Messages --------------------------------------------------------------------------


class MessageSerializer(serializers.Serializer[Any]):
    """One message of the history (assistant-only fields are null on other roles)."""

    position = serializers.IntegerField()
    role = serializers.ChoiceField(choices=Message.Role.choices)
    content = serializers.CharField()
    tool_calls = ToolCallSerializer(
        source="tool_calls.all", many=True, help_text="Empty except on assistant messages."
    )
    provider_tool_calls = ProviderToolCallSerializer(
        source="provider_tool_calls.all", many=True, help_text="The tools the provider ran itself."
    )
    citations = CitationSerializer(
        source="citations.all", many=True, help_text="The sources the provider cited, by span."
    )
    tool_call_id = serializers.CharField(
        source="tool_call.call_id",
        allow_null=True,
        help_text="On a tool message: the id of the call it answers.",
    )
    is_error = serializers.BooleanField(
        help_text="On a tool message: the result reports a failure (always false on other roles)."
    )
    run = serializers.UUIDField(source="run_id", allow_null=True)
    created_at = serializers.DateTimeField()
    model = serializers.CharField(allow_null=True)
    finish_reason = serializers.CharField(allow_null=True)
    usage = serializers.SerializerMethodField()
    latency_ms = serializers.IntegerField(allow_null=True)
    attachments = AttachmentReferencesField()
    cost = serializers.DecimalField(
        source="model_call.cost",
        max_digits=18,
        decimal_places=9,
        allow_null=True,
        help_text="On an assistant message: what the model call that produced it cost, in "
        "the app's currency (null when its price is unknown).",
    )
    context_view = ContextViewField()

    @extend_schema_field(UsageSerializer(allow_null=True))
    def get_usage(self, obj: Message) -> dict[str, int | bool | None] | None:
        return _usage(obj)

    def to_representation(self, instance: Message) -> dict[str, Any]:
        data = super().to_representation(instance)
        if instance.role != Message.Role.ASSISTANT:
            data.update(model=None, finish_reason=None, usage=None, latency_ms=None, cost=None)
        return data


class MessageListQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the message list."""

    after = serializers.IntegerField(
        required=False,
        min_value=-1,
        max_value=2**31 - 1,
        help_text="Only messages after this position (polling: the last position you have).",
    )


class RunListQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of a conversation's run list."""

    status = serializers.CharField(
        required=False,
        help_text="Only runs with one of these statuses, comma-separated "
        "(e.g. `failed,cancelled`).",
    )

    output_schema = serializers.RegexField(
        r"^[0-9a-f]{64}$",
        required=False,
        help_text="Only runs asked to answer in the schema with this sha256.",
    )

    def validate_status(self, value: str) -> list[str]:
        wanted = [item.strip() for item in value.split(",") if item.strip()]
        unknown = sorted(set(wanted) - set(RunStatus.values))
        if not wanted or unknown:
            valid = ", ".join(RunStatus.values)
            raise serializers.ValidationError(f"Unknown run status; valid statuses: {valid}.")
        return wanted


class MessageInputSerializer(serializers.Serializer[Any]):
    """A user message to answer: its text, its attachments, or both."""

    content = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="The user's text; at most CONVERSATIONS['MAX_CONTENT_BYTES'] UTF-8 bytes "
        "(default 32768), else 413 content_too_large. May be empty when `attachments` has one.",
    )
    attachments = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        default=list,
        help_text="Ids of your attachments (`POST /attachments/`), in order; at most "
        "CONVERSATIONS['MAX_ATTACHMENTS_PER_MESSAGE'] (default 10). An unknown or foreign id "
        "is a 400 naming its index.",
    )
    output_schema = serializers.JSONField(
        required=False,
        help_text="A JSON Schema (object) the final answer must satisfy, or the sha256 of one "
        "you used before; the run ends in `output` (docs/structured-output.md). Default: the "
        "profile's. 400 `invalid_schema` with the JSON pointer of a problem.",
    )

    default_error_messages = {
        "blank": "This field may not be blank.",
        "required": "This field is required.",
    }

    def validate_content(self, value: str) -> str:
        limit = app_settings().MAX_CONTENT_BYTES
        size = len(value.encode("utf-8"))
        if size > limit:
            detail = f"The content is {size} bytes (UTF-8); at most {limit} are accepted."
            raise APIError(
                detail,
                code="content_too_large",
                status_code=413,
                errors=[error_item("content_too_large", detail, pointer="/content")],
            )
        return value

    def validate_attachments(self, value: list[str]) -> list[str]:
        limit = app_settings().MAX_ATTACHMENTS_PER_MESSAGE
        if len(value) > limit:
            raise serializers.ValidationError(
                f"At most {limit} attachments per message; got {len(value)}.",
                code="too_many_attachments",
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs.setdefault("content", "")
        if not attrs["content"].strip() and not attrs.get("attachments"):
            code = "required" if "content" not in self.initial_data else "blank"
            detail = ErrorDetail(str(self.error_messages[code]), code=code)
            raise serializers.ValidationError({"content": [detail]})
        return attrs


# Runs ------------------------------------------------------------------------------


class RunSerializer(RunTreeSerializer):
    """One execution of the tool loop."""

    id = serializers.UUIDField()
    conversation = serializers.UUIDField(source="conversation_id")
    profile = serializers.CharField(source="profile.slug", allow_null=True)
    status = NamedChoiceField(choices=RunStatus.choices, component_name="RunStatus")
    termination_reason = NamedChoiceField(
        source="status",
        choices=RunStatus.choices,
        component_name="RunStatus",
        help_text="Why the run ended (running while it has not): its status.",
    )
    iterations = serializers.IntegerField()
    max_iterations = serializers.IntegerField()
    usage = serializers.SerializerMethodField()
    provider = serializers.CharField()
    model = serializers.CharField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.SerializerMethodField()
    error_code = serializers.CharField()
    error_message = serializers.CharField()
    cancel_requested = serializers.BooleanField(
        help_text="Someone asked the run to stop (`POST /runs/{id}/cancel/`)."
    )
    claimed_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When a process (the request or a worker) took the run; null while it waits.",
    )
    queued = serializers.SerializerMethodField(
        help_text="Running but not taken by any process yet: it waits for a worker."
    )
    final_content = serializers.CharField()
    tool_calls = serializers.SerializerMethodField()
    cost = serializers.DecimalField(
        max_digits=18,
        decimal_places=9,
        allow_null=True,
        help_text="Sum of the run's priced model calls (null while none had a known price).",
    )
    unpriced_calls = serializers.IntegerField(
        help_text="Model calls of the run whose price was unknown (not in `cost`)."
    )
    currency = serializers.SerializerMethodField()
    output_schema = serializers.CharField(
        source="output_schema.sha256",
        allow_null=True,
        help_text="sha256 of the JSON Schema the final answer had to satisfy (null: text).",
    )
    output = serializers.JSONField(
        allow_null=True,
        help_text="The final answer parsed and validated against the output schema; null "
        "without a schema or until the run completed.",
    )

    @extend_schema_field(serializers.BooleanField())
    def get_queued(self, obj: Run) -> bool:
        return obj.status == RunStatus.RUNNING and obj.claimed_at is None

    @extend_schema_field(serializers.CharField())
    def get_currency(self, obj: Run) -> str:
        return app_settings().CURRENCY

    @extend_schema_field(UsageSerializer)
    def get_usage(self, obj: Run) -> dict[str, int | bool | None]:
        # Estimated as soon as one of its calls is: the total is then partly a guess.
        return {
            **{name: getattr(obj, name) for name in USAGE_FIELDS},
            "estimated": obj.estimated_calls > 0,
        }

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_duration_ms(self, obj: Run) -> int | None:
        return timing.duration_ms(obj.started_at, obj.finished_at)

    @extend_schema_field(ToolCallSerializer(many=True))
    def get_tool_calls(self, obj: WithAnnotations[Run, _AssistantMessages]) -> list[dict[str, Any]]:
        # ``assistant_messages`` is prefetched with their calls (see views).
        calls = [call for message in obj.assistant_messages for call in message.tool_calls.all()]
        # ``many=True`` makes a ListSerializer, whose data is a list; the stubs
        # type every serializer's data as a dict.
        return cast(list[dict[str, Any]], ToolCallSerializer(calls, many=True).data)


class PostMessageResultSerializer(serializers.Serializer[Any]):
    """What a posted message produced."""

    run = RunSerializer()
    messages = MessageSerializer(many=True, help_text="The messages the run added, in order.")


class QueuedRunSerializer(PostMessageResultSerializer):
    """A run handed to a worker (``celery`` executor): follow it with ``events`` or ``url``."""

    messages = MessageSerializer(
        many=True, help_text="The messages the run has stored so far (the user message first)."
    )
    url = serializers.URLField(help_text="The run (`GET /runs/{id}/`), also in `Location`.")
    events = serializers.URLField(
        help_text="The run's live events (`GET /runs/{id}/events/`, Server-Sent Events)."
    )


class RunFailureSerializer(ErrorSerializer):
    """A run that ended because the provider failed (502, 503, 504).

    ``run`` and ``messages`` are absent when no run could start (a 503
    ``configuration_error``): the body is then the plain error shape.
    """

    run = RunSerializer(required=False)
    messages = MessageSerializer(
        many=True, required=False, help_text="The messages the run added, in order."
    )


# Conversations -----------------------------------------------------------------------


class LastRunSerializer(serializers.Serializer[Any]):
    """The newest run of a conversation."""

    id = serializers.UUIDField()
    status = NamedChoiceField(choices=RunStatus.choices, component_name="RunStatus")


class ConversationSerializer(serializers.Serializer[Any]):
    """A conversation as listed and shown."""

    id = serializers.UUIDField()
    title = serializers.CharField()
    profile = serializers.CharField(source="profile.slug", allow_null=True)
    metadata = serializers.DictField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    message_count = serializers.IntegerField()
    last_run = serializers.SerializerMethodField()
    forked_from = serializers.UUIDField(
        source="forked_from_id", allow_null=True, help_text="The source of this branch."
    )
    forked_at_position = serializers.IntegerField(
        allow_null=True, help_text="The last position copied from the source."
    )
    branch_root = serializers.UUIDField(
        source="branch_root_id", allow_null=True, help_text="The first conversation of the family."
    )

    @extend_schema_field(LastRunSerializer(allow_null=True))
    def get_last_run(self, obj: Any) -> dict[str, Any] | None:
        if obj.last_run_id is None:
            return None
        return {"id": str(obj.last_run_id), "status": obj.last_run_status}


class ConversationInputSerializer(serializers.Serializer[Any]):
    """What a client may set on a conversation."""

    title = serializers.CharField(max_length=TITLE_MAX_LENGTH, allow_blank=True, required=False)
    profile = ProfileSlugField(
        allow_null=True, required=False, help_text="Slug of an active profile; null for none."
    )
    metadata = JSONObjectField(required=False, help_text="Any JSON object, for the client.")

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        check_storable(value, field="metadata")
        return value


@extend_schema_field(ImportMessageSerializer)
class _WireMessageField(serializers.JSONField):
    """One message in the OpenAI wire shape; validated by the domain, not here."""


class ImportInputSerializer(ConversationInputSerializer):
    """A conversation to create from a history in the OpenAI wire shape."""

    messages = serializers.ListField(
        child=_WireMessageField(),
        # Empty is allowed: every conversation the export writes can be imported again.
        min_length=0,
        max_length=MAX_IMPORT_MESSAGES,
        help_text="Chat Completions messages: role, content, tool_calls (arguments as "
        "JSON text or object), tool_call_id, and on a tool message an optional boolean "
        "is_error (the result reports a failure). Every tool call must be answered. As the "
        "export writes them: attachments (user and tool messages), provider_tool_calls and "
        "citations (assistant messages).",
    )

    def validate_messages(self, value: list[Any]) -> list[Any]:
        check_storable(value, field="messages")
        return value


class ConversationListQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the conversation list."""

    q = serializers.CharField(
        required=False, allow_blank=True, max_length=TITLE_MAX_LENGTH, help_text="Search in titles."
    )
    branches = serializers.ChoiceField(
        choices=["roots", "all"],
        default="roots",
        help_text="`roots` (conversations that are not branches) or `all`.",
    )
