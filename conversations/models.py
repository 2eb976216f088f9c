"""The app's tables: configuration records and the conversation transcript.

Models hold shape and constraints, not behaviour. Every rule the database can
check on one row is a named ``CheckConstraint``/``UniqueConstraint`` here (both
SQLite and PostgreSQL enforce them); the rules that need other rows are
triggers installed by migration ``0002_triggers``. ``docs/data-model.md`` lists
each of the ten conversation rules and what enforces it on each database.

Once inserted, a message's conversation, position, role and tool call, and a
call's message and conversation, never change (a trigger refuses it): the
cross-row rules are checked on insert and stay true that way.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.lookups import Exact
from django.utils import timezone

from conversations import domain

__all__ = [
    "Conversation",
    "JSONTypeOf",
    "LanguageModel",
    "Message",
    "Profile",
    "Provider",
    "Run",
    "RunStatus",
    "ToolCall",
    "ToolCallStatus",
    "ToolSetting",
]


class JSONTypeOf(models.Func):
    """The JSON type name of a JSON column: ``object``, ``array``, ``string``, ...

    PostgreSQL spells it ``jsonb_typeof``, SQLite ``json_type``; both answer
    ``object`` and ``array`` alike, which is all the constraints compare with.
    On SQLite text that is not JSON at all yields ``invalid`` instead of an
    error, so the constraint fails cleanly (Django's own ``JSON_VALID`` check
    reports it too).
    """

    function = "JSON_TYPE"
    arity = 1
    output_field = models.CharField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, function="JSONB_TYPEOF", **extra_context)

    def as_sqlite(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.get_source_expressions()[0])
        return (
            f"CASE WHEN JSON_VALID({sql}) THEN JSON_TYPE({sql}) ELSE 'invalid' END",
            (*params, *params),
        )


def _is_json(field: str, json_type: str) -> Exact:
    return Exact(JSONTypeOf(field), json_type)


def _not_empty(*fields: str) -> Q:
    condition = Q()
    for field in fields:
        condition &= ~Q(**{field: ""})
    return condition


def _non_negative(*fields: str) -> Q:
    # NULL passes a CHECK, so nullable counters need no IS NULL branch.
    condition = Q()
    for field in fields:
        condition &= Q(**{f"{field}__gte": 0})
    return condition


_USAGE_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_prompt_tokens",
    "reasoning_tokens",
)


# Configuration records -------------------------------------------------------


class Provider(models.Model):
    """A configured model provider: which adapter, where, and a reference to its key."""

    class Adapter(models.TextChoices):
        OPENAI = "openai", "OpenAI"
        AZURE_OPENAI = "azure_openai", "Azure OpenAI"
        MISTRAL = "mistral", "Mistral"
        GROQ = "groq", "Groq"
        OPENROUTER = "openrouter", "OpenRouter"
        TOGETHER = "together", "Together AI"
        FIREWORKS = "fireworks", "Fireworks AI"
        OPENAI_COMPATIBLE = "openai_compatible", "OpenAI-compatible"
        ANTHROPIC = "anthropic", "Anthropic"
        GEMINI = "gemini", "Google Gemini"
        OLLAMA = "ollama", "Ollama"
        DEMO = "demo", "Demo (offline)"

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    adapter = models.CharField(max_length=32, choices=Adapter.choices)
    base_url = models.URLField(blank=True)
    api_key_ref = models.CharField(
        max_length=200,
        blank=True,
        help_text='A reference resolved at call time, e.g. "env:OPENAI_API_KEY"; never the key.',
    )
    timeout = models.FloatField(null=True, blank=True, help_text="Seconds; empty = app default.")
    max_retries = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Empty = app default."
    )
    extra_headers = models.JSONField(default=dict, blank=True)
    options = models.JSONField(
        default=dict, blank=True, help_text='Adapter options, e.g. {"api_version": "..."}.'
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=_is_json("extra_headers", "object"),
                name="conversations_provider_extra_headers_object",
            ),
            models.CheckConstraint(
                condition=_is_json("options", "object"),
                name="conversations_provider_options_object",
            ),
            models.CheckConstraint(
                condition=Q(timeout__gt=0), name="conversations_provider_timeout_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.adapter})"


class LanguageModel(models.Model):
    """A model offered by a provider, with its limits and prices."""

    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="models")
    model_id = models.CharField(max_length=200, help_text="The provider's name for the model.")
    name = models.CharField(max_length=200, blank=True)
    context_window = models.PositiveIntegerField(null=True, blank=True)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    input_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    output_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    sampling_parameters = models.JSONField(
        null=True,
        blank=True,
        help_text="The sampling parameters this model accepts, as a list of names "
        '(e.g. ["temperature"]); empty = the adapter\'s default (see docs/providers.md). '
        "Parameters the model does not accept are never sent.",
    )
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["provider_id", "model_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "model_id"], name="conversations_languagemodel_unique"
            ),
            models.CheckConstraint(
                condition=_not_empty("model_id"),
                name="conversations_languagemodel_model_id_not_empty",
            ),
            models.CheckConstraint(
                condition=_non_negative("input_price_per_million", "output_price_per_million"),
                name="conversations_languagemodel_prices_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(sampling_parameters__isnull=True)
                | _is_json("sampling_parameters", "array"),
                name="conversations_languagemodel_sampling_parameters_array",
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.model_id


class Profile(models.Model):
    """A named way to talk: model, system prompt, sampling, tool policy."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    language_model = models.ForeignKey(
        LanguageModel, on_delete=models.PROTECT, related_name="profiles"
    )
    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    max_iterations = models.PositiveSmallIntegerField(default=10)
    allowed_tools = models.JSONField(
        null=True,
        blank=True,
        help_text=(
            "Empty (null) = every enabled tool; otherwise a list of the tool names this "
            "profile may offer ([] = none)."
        ),
    )
    tool_choice = models.CharField(
        max_length=64,
        default="auto",
        help_text='"auto", "none", "required" or the name of one tool.',
    )
    is_active = models.BooleanField(default=True)
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"],
                condition=Q(is_default=True),
                name="conversations_profile_one_default",
                violation_error_message="Another profile is already the default.",
            ),
            models.CheckConstraint(
                condition=Q(max_iterations__gte=1),
                name="conversations_profile_max_iterations_positive",
            ),
            models.CheckConstraint(
                condition=Q(allowed_tools__isnull=True) | _is_json("allowed_tools", "array"),
                name="conversations_profile_allowed_tools_list",
            ),
            models.CheckConstraint(
                condition=_not_empty("tool_choice"),
                name="conversations_profile_tool_choice_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(temperature__gte=0), name="conversations_profile_temperature_range"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ToolSetting(models.Model):
    """An admin's switch for one registered tool; a disabled tool is offered nowhere."""

    name = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({'enabled' if self.enabled else 'disabled'})"


# The transcript ----------------------------------------------------------------


class ToolCallStatus(models.TextChoices):
    """Execution state of a tool call (``ToolCall.Status``)."""

    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    REJECTED = "rejected", "Rejected"
    INTERRUPTED = "interrupted", "Interrupted"
    CANCELLED = "cancelled", "Cancelled"


class RunStatus(models.TextChoices):
    """State of one tool-loop run (``Run.Status``)."""

    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    MAX_ITERATIONS = "max_iterations", "Stopped at max iterations"
    FAILED = "failed", "Failed"
    INTERRUPTED = "interrupted", "Interrupted"
    CANCELLED = "cancelled", "Cancelled"


class Conversation(models.Model):
    """One conversation of one user; its messages are the history sent to a model."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="llm_conversations"
    )
    title = models.CharField(max_length=200, blank=True)
    profile = models.ForeignKey(
        Profile,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="conversations",
    )
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="conversations_conv_owner_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=_is_json("metadata", "object"),
                name="conversations_conversation_metadata_object",
            ),
        ]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class Message(models.Model):
    """One message of a conversation, at a 0-based, gapless position.

    ``tool_call`` is set exactly on ``tool`` messages: the call this message
    answers. Its UNIQUE constraint makes a call answered at most once.
    """

    Role = models.TextChoices(
        "Role", [(role.name, (role.value, role.value.capitalize())) for role in domain.Role]
    )

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_call = models.ForeignKey(
        "ToolCall",
        on_delete=models.RESTRICT,
        null=True,
        blank=True,
        related_name="results",
    )
    run = models.ForeignKey(
        "Run", on_delete=models.SET_NULL, null=True, blank=True, related_name="messages"
    )
    model = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=64, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    provider_metadata = models.JSONField(default=dict, blank=True)
    is_error = models.BooleanField(
        default=False, help_text="A tool result that reports a failure (flagged to providers)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            # Rule 1
            models.CheckConstraint(
                condition=Q(role__in=[role.value for role in domain.Role]),
                name="conversations_message_role_valid",
            ),
            # Rule 2
            models.CheckConstraint(
                condition=Q(role=domain.Role.TOOL.value, tool_call__isnull=False)
                | (~Q(role=domain.Role.TOOL.value) & Q(tool_call__isnull=True)),
                name="conversations_message_tool_call_iff_tool",
                violation_error_message="A tool message answers exactly one tool call; "
                "any other message answers none.",
            ),
            # Rule 4 (at most once; same conversation and order are triggers)
            models.UniqueConstraint(
                fields=["tool_call"],
                name="conversations_message_tool_call_answered_once",
                violation_error_message="This tool call already has an answer.",
            ),
            # Rule 7
            models.CheckConstraint(
                condition=Q(position__gte=0), name="conversations_message_position_non_negative"
            ),
            models.UniqueConstraint(
                fields=["conversation", "position"],
                name="conversations_message_position_unique",
            ),
            # Rule 10
            models.CheckConstraint(
                condition=_non_negative(*_USAGE_FIELDS, "latency_ms"),
                name="conversations_message_counts_non_negative",
            ),
            models.CheckConstraint(
                condition=_is_json("provider_metadata", "object"),
                name="conversations_message_provider_metadata_object",
            ),
            models.CheckConstraint(
                condition=Q(is_error=False) | Q(role=domain.Role.TOOL.value),
                name="conversations_message_is_error_only_tool",
                violation_error_message="Only a tool message can report an error.",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.position} {self.role}"


class ToolCall(models.Model):
    """One call an assistant message made, and the state of its execution.

    ``conversation`` repeats ``message.conversation`` (a trigger keeps them
    equal) so that ``call_id`` can be unique per conversation and a history's
    calls can be read in one query.
    """

    Status = ToolCallStatus

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="tool_calls")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="tool_calls"
    )
    index = models.PositiveSmallIntegerField(help_text="Order within the assistant message.")
    call_id = models.CharField(max_length=200, help_text="The provider's id of the call.")
    name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    # NULL (no raw text) differs from any text, so this text field is nullable.
    raw_arguments = models.TextField(  # noqa: DJ001
        null=True,
        blank=True,
        help_text="The provider's argument text when it was not a JSON object; "
        "such a call is never executed.",
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=ToolCallStatus.PENDING)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="Detail for admins; never sent to a model.")

    class Meta:
        ordering = ["message_id", "index"]
        # The admin filters and counts calls by tool name.
        indexes = [models.Index(fields=["name"], name="conversations_toolcall_name")]
        constraints = [
            # Rule 5
            models.CheckConstraint(
                condition=_is_json("arguments", "object"),
                name="conversations_toolcall_arguments_object",
                violation_error_message="Tool call arguments must be a JSON object.",
            ),
            # Rule 6
            models.CheckConstraint(
                condition=_not_empty("call_id", "name"),
                name="conversations_toolcall_call_id_name_not_empty",
            ),
            models.UniqueConstraint(
                fields=["conversation", "call_id"],
                name="conversations_toolcall_call_id_unique",
                violation_error_message="This call id is already used in the conversation.",
            ),
            models.UniqueConstraint(
                fields=["message", "index"], name="conversations_toolcall_index_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__in=ToolCallStatus.values),
                name="conversations_toolcall_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} [{self.call_id}]"


class Run(models.Model):
    """One execution of the tool loop on a conversation."""

    Status = RunStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="runs")
    profile = models.ForeignKey(
        Profile, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=RunStatus.RUNNING)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(default=timezone.now)
    iterations = models.PositiveSmallIntegerField(default=0)
    max_iterations = models.PositiveSmallIntegerField()
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveIntegerField(default=0)
    cached_prompt_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    error_code = models.CharField(max_length=100, blank=True)
    error_message = models.TextField(blank=True)
    provider = models.CharField(max_length=100, blank=True, help_text="Provider slug or adapter.")
    model = models.CharField(max_length=200, blank=True)
    cancel_requested = models.BooleanField(default=False)
    claimed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a process took the run to execute it; empty while it waits in a queue.",
    )
    worker = models.CharField(
        max_length=200, blank=True, help_text="host:pid of the process that took the run."
    )
    final_content = models.TextField(
        blank=True, help_text="The text of the run's last assistant answer, if it ended with one."
    )

    class Meta:
        ordering = ["-started_at"]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="conversations_run_status_idx"),
        ]
        constraints = [
            # Rule 9
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status=RunStatus.RUNNING),
                name="conversations_run_one_running",
                violation_error_message="Another run is already running on this conversation.",
            ),
            # Rule 10
            models.CheckConstraint(
                condition=_non_negative(*_USAGE_FIELDS),
                name="conversations_run_counts_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(iterations__lte=models.F("max_iterations")),
                name="conversations_run_iterations_within_max",
            ),
            models.CheckConstraint(
                condition=Q(max_iterations__gte=1),
                name="conversations_run_max_iterations_positive",
            ),
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="conversations_run_status_valid"
            ),
            # A claim names its process: admins can tell which worker ran what.
            models.CheckConstraint(
                condition=Q(claimed_at__isnull=True) | ~Q(worker=""),
                name="conversations_run_claim_has_worker",
            ),
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.status})"
