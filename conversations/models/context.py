"""Summaries of the turns a context window's view leaves out (the ``summarize`` strategy)."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from conversations.domain.storable import MAX_NAME_LENGTH

from .config import Profile
from .transcript import Conversation
from .usage import ModelCall

__all__ = ["ContextSummary"]


class ContextSummary(models.Model):
    """What a summary call made of the stored messages ``first_position..last_position``.

    Sent in place of those messages (with the system prompt) while a view's
    cut stays just after them; the messages themselves are never changed.
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="context_summaries"
    )
    first_position = models.PositiveIntegerField(default=0)
    last_position = models.PositiveIntegerField(
        help_text="The last stored position the summary covers (the view starts after it)."
    )
    content = models.TextField()
    profile = models.ForeignKey(
        Profile,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="context_summaries",
        help_text="The profile that wrote it (the run's profile's summary_profile).",
    )
    model = models.CharField(max_length=MAX_NAME_LENGTH, blank=True)
    model_call = models.OneToOneField(
        ModelCall,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="summary_made",
        help_text="The ledger row of the call that wrote it (its tokens and cost).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "-last_position"]
        verbose_name_plural = "context summaries"
        indexes = [
            models.Index(
                fields=["conversation", "-last_position"], name="conversations_csummary_idx"
            )
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(first_position__lte=F("last_position")),
                name="conversations_contextsummary_covers_a_range",
            )
        ]

    def __str__(self) -> str:
        return f"summary of {self.first_position}..{self.last_position}"
