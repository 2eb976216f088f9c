"""The transcript: conversations, their messages and tool calls, and the runs that wrote them."""

from __future__ import annotations

import uuid
from typing import Any, Final

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from conversations import domain
from conversations.domain.storable import MAX_NAME_LENGTH

from .config import Profile
from .constraints import DeepJSONDecoder, is_json, non_negative, not_empty
from .feedback import Evaluation

__all__ = [
    "BUSY_RUN_STATUSES",
    "TITLE_MAX_LENGTH",
    "Conversation",
    "ConversationKind",
    "Message",
    "Run",
    "RunStatus",
    "ToolCall",
    "ToolCallStatus",
]


class ToolCallStatus(models.TextChoices):
    """Execution state of a tool call (``ToolCall.Status``)."""

    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    REJECTED = "rejected", "Rejected"
    INTERRUPTED = "interrupted", "Interrupted"
    CANCELLED = "cancelled", "Cancelled"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    TIMED_OUT = "timed_out", "Timed out"


class RunStatus(models.TextChoices):
    """State of one tool-loop run (``Run.Status``)."""

    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    MAX_ITERATIONS = "max_iterations", "Stopped at max iterations"
    FAILED = "failed", "Failed"
    INTERRUPTED = "interrupted", "Interrupted"
    CANCELLED = "cancelled", "Cancelled"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    BUDGET_EXHAUSTED = "budget_exhausted", "Stopped by a budget"


class ConversationKind(models.TextChoices):
    """What a conversation is for (``Conversation.Kind``)."""

    CHAT = "chat", "Chat"
    EVALUATION = "evaluation", "Evaluation"


BUSY_RUN_STATUSES = (RunStatus.RUNNING, RunStatus.AWAITING_APPROVAL)
"""A run in one of these holds its conversation: no other run may start."""

TITLE_MAX_LENGTH: Final = 200
"""The longest conversation title, in characters: the column's size, and what the API,
the services and the commands check or cut a title to."""


class Conversation(models.Model):
    """One conversation of one user; its messages are the history sent to a model."""

    Kind = ConversationKind

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="llm_conversations"
    )
    title = models.CharField(max_length=TITLE_MAX_LENGTH, blank=True)
    profile = models.ForeignKey(
        Profile,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="conversations",
    )
    metadata = models.JSONField(default=dict, blank=True, decoder=DeepJSONDecoder)
    # A branch is a conversation of its own; these three say where it came from.
    forked_from = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="forks",
        help_text="The conversation this branch was copied from (empty for a root).",
    )
    forked_at_position = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The last position copied from the source; empty when nothing was copied. "
        "Kept when the source is deleted.",
    )
    branch_root = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="family",
        help_text="The first conversation of the family (itself for a root).",
    )
    kind = models.CharField(
        max_length=16,
        choices=ConversationKind,
        default=ConversationKind.CHAT,
        help_text="An evaluation's replays are hidden from the user's list and from exports.",
    )
    evaluation = models.ForeignKey(
        Evaluation,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="conversations",
        help_text="The evaluation this conversation replays an example of.",
    )
    redacted_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its contents were replaced by the redaction marker (never exported).",
    )
    parent_tool_call = models.ForeignKey(
        "ToolCall",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="agent_conversations",
        help_text="The agent call of another conversation this one answers (a sub-agent's "
        "conversation, kept out of its owner's list); empty for a conversation of its own.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="conversations_conv_owner_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=is_json("metadata", "object"),
                name="conversations_conversation_metadata_object",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=ConversationKind.values),
                name="conversations_conversation_kind_valid",
            ),
            models.CheckConstraint(
                condition=Q(evaluation__isnull=True) | Q(kind=ConversationKind.EVALUATION),
                name="conversations_conversation_evaluation_kind",
                violation_error_message="Only an evaluation conversation belongs to an evaluation.",
            ),
        ]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A conversation created without a family starts its own: every row
        # names its root, so a family is one indexed lookup.
        if self.branch_root_id is None and self.forked_from_id is None:
            self.branch_root_id = self.pk
        super().save(*args, **kwargs)


class Message(models.Model):
    """One message of a conversation, at a 0-based, gapless position.

    ``tool_call`` is set exactly on ``tool`` messages: the call this message
    answers. Its UNIQUE constraint makes a call answered at most once.
    """

    class Role(models.TextChoices):
        """The roles of ``domain.Role``, with labels (a class so the type checker sees members)."""

        SYSTEM = domain.Role.SYSTEM.value, "System"
        USER = domain.Role.USER.value, "User"
        ASSISTANT = domain.Role.ASSISTANT.value, "Assistant"
        TOOL = domain.Role.TOOL.value, "Tool"

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
    model = models.CharField(max_length=MAX_NAME_LENGTH, blank=True)
    finish_reason = models.CharField(max_length=64, blank=True)
    prompt_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    total_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    cached_prompt_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    reasoning_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    usage_estimated = models.BooleanField(
        default=False, help_text="The token counts are an estimate (the provider reported none)."
    )
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    provider_metadata = models.JSONField(default=dict, blank=True, decoder=DeepJSONDecoder)
    token_estimate = models.PositiveIntegerField(
        default=0,
        help_text="About how many tokens the message is on the wire, estimated offline when "
        "it was stored (what choosing a context window's view reads; docs/context.md).",
    )
    is_error = models.BooleanField(
        default=False, help_text="A tool result that reports a failure (flagged to providers)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position"]
        # The turns (messages other than tool results) by position: the rule-8
        # triggers find the last one before a new message with one index probe.
        indexes = [
            models.Index(
                fields=["conversation", "position"],
                condition=~Q(role=domain.Role.TOOL.value),
                name="conversations_message_turn_idx",
            ),
        ]
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
                condition=non_negative(*domain.USAGE_FIELDS, "latency_ms"),
                name="conversations_message_counts_non_negative",
            ),
            models.CheckConstraint(
                condition=is_json("provider_metadata", "object"),
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
    call_id = models.CharField(
        max_length=MAX_NAME_LENGTH, help_text="The provider's id of the call."
    )
    name = models.CharField(max_length=MAX_NAME_LENGTH)
    arguments = models.JSONField(default=dict, blank=True, decoder=DeepJSONDecoder)
    # NULL (no raw text) differs from any text, so this text field is nullable.
    raw_arguments = models.TextField(  # noqa: DJ001
        null=True,
        blank=True,
        help_text="The provider's argument text when it was not a JSON object; "
        "such a call is never executed.",
    )
    status = models.CharField(max_length=32, choices=Status.choices, default=ToolCallStatus.PENDING)
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
                condition=is_json("arguments", "object"),
                name="conversations_toolcall_arguments_object",
                violation_error_message="Tool call arguments must be a JSON object.",
            ),
            # Rule 6
            models.CheckConstraint(
                condition=not_empty("call_id", "name"),
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
    status = models.CharField(max_length=32, choices=Status.choices, default=RunStatus.RUNNING)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(default=timezone.now)
    iterations = models.PositiveSmallIntegerField(default=0)
    max_iterations = models.PositiveSmallIntegerField()
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    total_tokens = models.PositiveBigIntegerField(default=0)
    cached_prompt_tokens = models.PositiveBigIntegerField(default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0)
    error_code = models.CharField(max_length=100, blank=True)
    error_message = models.TextField(blank=True)
    provider = models.CharField(max_length=100, blank=True, help_text="Provider slug or adapter.")
    model = models.CharField(max_length=MAX_NAME_LENGTH, blank=True)
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
    cost = models.DecimalField(
        max_digits=18,
        decimal_places=9,
        null=True,
        blank=True,
        help_text="Sum of its priced model calls; empty while none had a price.",
    )
    unpriced_calls = models.PositiveIntegerField(
        default=0, help_text="Model calls of the run whose price was unknown."
    )
    estimated_calls = models.PositiveIntegerField(
        default=0, help_text="Model calls of the run whose tokens are an estimate."
    )
    output_schema = models.ForeignKey(
        "conversations.OutputSchema",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="runs",
        help_text="The schema the final answer had to satisfy; empty = a text answer.",
    )
    output = models.JSONField(
        null=True,
        blank=True,
        decoder=DeepJSONDecoder,
        help_text="The final answer, parsed and validated against the output schema.",
    )
    parent_run = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="children",
        help_text="The run whose agent call started this one (a sub-agent's run).",
    )
    root_run = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="descendants",
        help_text="The first run of the chain of agent calls this run belongs to; empty for "
        "a run no agent call started.",
    )

    class Meta:
        ordering = ["-started_at"]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="conversations_run_status_idx"),
            # The outputs produced under a schema, newest first.
            models.Index(
                fields=["output_schema", "-started_at"], name="conversations_run_output_idx"
            ),
        ]
        constraints = [
            # Rule 9 (a run waiting for an approval still holds its conversation)
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status__in=BUSY_RUN_STATUSES),
                name="conversations_run_one_running",
                violation_error_message="Another run is already running on this conversation.",
            ),
            # Rule 10
            models.CheckConstraint(
                condition=non_negative(*domain.USAGE_FIELDS),
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
            # Output is part of the run: one that had to answer in a schema and
            # succeeded holds the validated value (JSON null is a value, not SQL NULL).
            models.CheckConstraint(
                condition=~Q(
                    status=RunStatus.COMPLETED, output_schema__isnull=False, output__isnull=True
                ),
                name="conversations_run_output_when_completed",
                violation_error_message="A completed run with an output schema has an output.",
            ),
            # A claim names its process: admins can tell which worker ran what.
            models.CheckConstraint(
                condition=Q(claimed_at__isnull=True) | ~Q(worker=""),
                name="conversations_run_claim_has_worker",
            ),
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.status})"
