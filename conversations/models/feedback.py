"""Judgements on the record: users' feedback, scores, and the evaluations that produced them."""

from __future__ import annotations

from typing import Final

from django.conf import settings
from django.db import models
from django.db.models import Q

from .constraints import DeepJSONDecoder, is_json, not_empty

__all__ = [
    "FEEDBACK_TARGETS",
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "SCORE_TARGETS",
    "SCORE_VALUES",
    "Evaluation",
    "Feedback",
    "Score",
    "ScoreSource",
]

FEEDBACK_TARGETS: Final = ("message", "tool_call", "run")
"""What a feedback row may judge; exactly one of these columns is set (a database check)."""

SCORE_TARGETS: Final = ("message", "run")
"""What a score may judge; exactly one is set (a database check)."""

SCORE_VALUES: Final = ("value_number", "value_bool", "value_label")
"""A score's value columns; exactly one is set (a database check)."""

MAX_TAGS: Final = 10
"""The most tags one feedback row may carry."""

MAX_TAG_LENGTH: Final = 50
"""The longest tag, in characters."""


def exactly_one(*fields: str) -> Q:
    """Exactly one of the nullable ``fields`` is set."""
    condition = Q(pk__in=[])
    for chosen in fields:
        branch = Q(**{f"{chosen}__isnull": False})
        for other in fields:
            if other != chosen:
                branch &= Q(**{f"{other}__isnull": True})
        condition |= branch
    return condition


class Feedback(models.Model):
    """A user's thumbs up or down on an assistant message, a tool call or a run.

    One row per user and target: giving feedback again replaces it.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="llm_feedback"
    )
    message = models.ForeignKey(
        "conversations.Message",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="feedback",
    )
    tool_call = models.ForeignKey(
        "conversations.ToolCall",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="feedback",
    )
    run = models.ForeignKey(
        "conversations.Run",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="feedback",
    )
    value = models.SmallIntegerField(help_text="+1 (up) or -1 (down).")
    comment = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True, decoder=DeepJSONDecoder)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        verbose_name_plural = "feedback"
        indexes = [
            # The admin's rates read feedback by time.
            models.Index(fields=["updated_at"], name="conversations_feedback_time"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=exactly_one(*FEEDBACK_TARGETS),
                name="conversations_feedback_one_target",
                violation_error_message="Feedback judges exactly one message, tool call or run.",
            ),
            models.CheckConstraint(
                condition=Q(value__in=[1, -1]), name="conversations_feedback_value_sign"
            ),
            models.CheckConstraint(
                condition=is_json("tags", "array"), name="conversations_feedback_tags_array"
            ),
            models.UniqueConstraint(
                fields=["user", "message"],
                condition=Q(message__isnull=False),
                name="conversations_feedback_one_per_message",
            ),
            models.UniqueConstraint(
                fields=["user", "tool_call"],
                condition=Q(tool_call__isnull=False),
                name="conversations_feedback_one_per_tool_call",
            ),
            models.UniqueConstraint(
                fields=["user", "run"],
                condition=Q(run__isnull=False),
                name="conversations_feedback_one_per_run",
            ),
        ]

    def __str__(self) -> str:
        return f"{'up' if self.value > 0 else 'down'} by {self.user_id}"


class ScoreSource(models.TextChoices):
    """Who gave a score (``Score.Source``)."""

    USER = "user", "User"
    EVALUATOR = "evaluator", "Evaluator"
    ADMIN = "admin", "Admin"


class Evaluation(models.Model):
    """One replay of a dataset on one or more profiles, and its totals."""

    profiles = models.JSONField(
        default=list, decoder=DeepJSONDecoder, help_text="The slugs of the profiles compared."
    )
    scorers = models.JSONField(
        default=list, decoder=DeepJSONDecoder, help_text="The names of the scorers run."
    )
    dataset = models.CharField(max_length=255, blank=True, help_text="The dataset's file name.")
    dataset_sha256 = models.CharField(max_length=64, help_text="sha256 of the dataset's bytes.")
    examples = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="llm_evaluations",
    )
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    totals = models.JSONField(
        default=dict,
        blank=True,
        decoder=DeepJSONDecoder,
        help_text="Per profile: runs, failures, mean per scorer, cost, latency p50 and p95.",
    )

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.CheckConstraint(
                condition=is_json("profiles", "array"),
                name="conversations_evaluation_profiles_array",
            ),
            models.CheckConstraint(
                condition=is_json("totals", "object"),
                name="conversations_evaluation_totals_object",
            ),
            models.CheckConstraint(
                condition=Q(dataset_sha256__regex=r"^[0-9a-f]{64}$"),
                name="conversations_evaluation_sha256_hex",
            ),
        ]

    def __str__(self) -> str:
        return f"Evaluation {self.pk} ({', '.join(map(str, self.profiles))})"


class Score(models.Model):
    """A named value given to a run or a message: by a user, an evaluator or an admin."""

    Source = ScoreSource

    message = models.ForeignKey(
        "conversations.Message",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="scores",
    )
    run = models.ForeignKey(
        "conversations.Run",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="scores",
    )
    name = models.CharField(max_length=100)
    value_number = models.FloatField(null=True, blank=True)
    value_bool = models.BooleanField(null=True, blank=True)
    value_label = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    source = models.CharField(max_length=16, choices=ScoreSource)
    comment = models.TextField(blank=True)
    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.CASCADE, null=True, blank=True, related_name="scores"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="llm_scores",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=exactly_one(*SCORE_TARGETS),
                name="conversations_score_one_target",
                violation_error_message="A score judges exactly one run or message.",
            ),
            models.CheckConstraint(
                condition=exactly_one(*SCORE_VALUES),
                name="conversations_score_one_value",
                violation_error_message="A score has exactly one value: a number, "
                "a boolean or a label.",
            ),
            models.CheckConstraint(
                condition=not_empty("name"), name="conversations_score_name_not_empty"
            ),
            models.CheckConstraint(
                condition=Q(source__in=ScoreSource.values), name="conversations_score_source_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}={self.value}"

    @property
    def value(self) -> float | bool | str | None:
        """Whichever value column is set."""
        for column in SCORE_VALUES:
            found = getattr(self, column)
            if found is not None:
                return found  # type: ignore[no-any-return]
        return None
