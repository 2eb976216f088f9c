"""The usage ledger and budgets: every model call with its price, and the limits on spending."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.domain.storable import MAX_NAME_LENGTH

from .config import Profile
from .constraints import non_negative, not_empty
from .transcript import Conversation, Message, Run

__all__ = ["Budget", "BudgetCounter", "ModelCall"]

PRICE_FIELDS = (
    "input_price_per_million",
    "cached_input_price_per_million",
    "output_price_per_million",
    "reasoning_price_per_million",
    "web_search_price_per_call",
)
"""The price snapshot a model call keeps (same names as on ``LanguageModel``)."""


class ModelCall(models.Model):
    """One request sent to a provider, successful or not, with what it cost."""

    class Status(models.TextChoices):
        OK = "ok", "OK"
        ERROR = "error", "Error"

    # The ledger outlives the transcript: deleting a conversation must not
    # erase what its calls cost (nor refund a budget: counters are separate).
    run = models.ForeignKey(
        Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="model_calls"
    )
    root_run = models.ForeignKey(
        Run,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="tree_model_calls",
        help_text="The first run of the chain of agent calls the call was made in (its own "
        "run when no agent call started it): a run's total is the sum of the rows under it.",
    )
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="model_calls",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="llm_model_calls",
        help_text="The conversation's owner when the call was made (totals group by it).",
    )
    profile = models.ForeignKey(
        Profile, on_delete=models.SET_NULL, null=True, blank=True, related_name="model_calls"
    )
    message = models.OneToOneField(
        Message,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="model_call",
        help_text="The assistant message the call produced (empty when it failed).",
    )
    first_position = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The position of the first stored message the call sent (what came before "
        "was left out to fit the context window); empty: it sent no stored message.",
    )
    context_summary = models.ForeignKey(
        "conversations.ContextSummary",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The summary sent in place of the messages before first_position, if any.",
    )
    provider = models.CharField(max_length=100, blank=True)
    model = models.CharField(
        max_length=MAX_NAME_LENGTH,
        blank=True,
        help_text="The model asked for (the answering model's name is on the message).",
    )
    started_at = models.DateTimeField(help_text="When the call was allowed to start.")
    recorded_at = models.DateTimeField(auto_now_add=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    time_to_first_token_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="When the answer was streamed."
    )
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cached_prompt_tokens = models.PositiveBigIntegerField(default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0)
    estimated = models.BooleanField(
        default=False,
        help_text="The tokens are an estimate from the text: the provider reported none "
        "(the answer was stopped, cut at a deadline or broke off).",
    )
    status = models.CharField(max_length=8, choices=Status.choices)
    error_code = models.CharField(max_length=100, blank=True)
    input_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    cached_input_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    output_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    reasoning_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    web_search_calls = models.PositiveIntegerField(
        default=0, help_text="Web searches the provider ran itself while answering."
    )
    web_search_price_per_call = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    currency = models.CharField(max_length=3)
    cost = models.DecimalField(
        max_digits=18,
        decimal_places=9,
        null=True,
        blank=True,
        help_text="Empty when a price the call needed was unknown (never 0 for unknown).",
    )

    class Meta:
        ordering = ["-started_at"]
        permissions = [("view_all_usage", "Can view the usage of every user")]
        indexes = [
            models.Index(fields=["started_at"], name="conversations_mcall_at_idx"),
            models.Index(fields=["user", "started_at"], name="conversations_mcall_user_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["ok", "error"]),
                name="conversations_modelcall_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(status="ok", error_code="") | (Q(status="error") & ~Q(error_code="")),
                name="conversations_modelcall_error_code_iff_error",
            ),
            models.CheckConstraint(
                condition=non_negative("cost", *PRICE_FIELDS),
                name="conversations_modelcall_money_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(cached_prompt_tokens__lte=models.F("prompt_tokens"))
                & Q(reasoning_tokens__lte=models.F("completion_tokens")),
                name="conversations_modelcall_token_parts",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} at {self.started_at:%Y-%m-%d %H:%M:%S} ({self.status})"


class Budget(models.Model):
    """A limit on tokens and/or cost per period, for one user, one profile or everyone."""

    class Scope(models.TextChoices):
        USER = "user", "One user"
        PROFILE = "profile", "One profile"
        GLOBAL = "global", "Everyone"

    class Period(models.TextChoices):
        DAY = "day", "Day"
        WEEK = "week", "Week (from Monday)"
        MONTH = "month", "Month"
        TOTAL = "total", "Total (never resets)"

    class Action(models.TextChoices):
        BLOCK = "block", "Block further calls"
        WARN = "warn", "Warn (send budget_warning)"

    name = models.CharField(max_length=200, unique=True)
    scope = models.CharField(max_length=8, choices=Scope.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="llm_budgets",
    )
    profile = models.ForeignKey(
        Profile, on_delete=models.CASCADE, null=True, blank=True, related_name="budgets"
    )
    period = models.CharField(max_length=8, choices=Period.choices)
    token_limit = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Prompt + completion tokens per period."
    )
    cost_limit = models.DecimalField(
        max_digits=14,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="In the app's currency, per period (calls without a price count 0).",
    )
    action = models.CharField(max_length=8, choices=Action.choices, default=Action.BLOCK)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=not_empty("name"), name="conversations_budget_name_not_empty"
            ),
            models.CheckConstraint(
                condition=Q(scope="user", user__isnull=False, profile__isnull=True)
                | Q(scope="profile", user__isnull=True, profile__isnull=False)
                | Q(scope="global", user__isnull=True, profile__isnull=True),
                name="conversations_budget_scope_target",
                violation_error_message="A user budget names a user, a profile budget a "
                "profile, a global budget neither.",
            ),
            models.CheckConstraint(
                condition=Q(token_limit__isnull=False) | Q(cost_limit__isnull=False),
                name="conversations_budget_has_limit",
                violation_error_message="Set a token limit, a cost limit or both.",
            ),
            models.CheckConstraint(
                condition=non_negative("cost_limit"),
                name="conversations_budget_cost_limit_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(period__in=["day", "week", "month", "total"]),
                name="conversations_budget_period_valid",
            ),
            models.CheckConstraint(
                condition=Q(action__in=["block", "warn"]),
                name="conversations_budget_action_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class BudgetCounter(models.Model):
    """What a budget's scope spent in one period; locked and updated with each ``ModelCall``."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="counters")
    period_start = models.DateTimeField()
    tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=18, decimal_places=9, default=0)
    calls = models.PositiveIntegerField(default=0)
    warned_at = models.DateTimeField(
        null=True, blank=True, help_text="When budget_warning was sent for this period."
    )

    class Meta:
        ordering = ["-period_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "period_start"], name="conversations_budgetcounter_unique"
            ),
            models.CheckConstraint(
                condition=non_negative("cost"), name="conversations_budgetcounter_cost_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.budget} from {self.period_start:%Y-%m-%d}"
