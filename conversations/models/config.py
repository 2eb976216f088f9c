"""Configuration records: providers, language models, profiles and the tool switches."""

from __future__ import annotations

from typing import Any, Final

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from conversations.domain.storable import MAX_NAME_LENGTH

from .constraints import is_json, non_negative, not_empty, null_or_json

__all__ = [
    "ApprovalPolicy",
    "ContextStrategy",
    "LanguageModel",
    "Profile",
    "Provider",
    "ToolSetting",
]


class ApprovalPolicy(models.TextChoices):
    """Whether a tool's calls wait for a human decision (on a profile or a tool setting)."""

    DEFAULT = "default", "Default (defer to the less specific setting)"
    ALWAYS = "always", "Always (the conversation's owner decides)"
    STAFF = "staff", "Staff (a holder of conversations.approve_toolcall decides)"
    NEVER = "never", "Never"


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
        OPENAI_RESPONSES = "openai_responses", "OpenAI Responses API"
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
    max_response_bytes = models.PositiveIntegerField(
        default=10 * 1024 * 1024,
        help_text="Largest answer read from the provider, in bytes; a bigger one fails the "
        "call (invalid_response).",
    )
    max_stream_seconds = models.FloatField(
        default=600.0,
        help_text="Longest a streamed answer may last, in seconds; a longer one is cut "
        "(provider_timeout) and what arrived is kept.",
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
                condition=is_json("extra_headers", "object"),
                name="conversations_provider_extra_headers_object",
            ),
            models.CheckConstraint(
                condition=is_json("options", "object"),
                name="conversations_provider_options_object",
            ),
            models.CheckConstraint(
                condition=Q(timeout__gt=0), name="conversations_provider_timeout_positive"
            ),
            models.CheckConstraint(
                condition=Q(max_stream_seconds__gt=0),
                name="conversations_provider_max_stream_seconds_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_response_bytes__gt=0),
                name="conversations_provider_max_response_bytes_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.adapter})"


INPUT_MODALITIES: Final = ("image", "pdf")
"""What ``LanguageModel.input_modalities`` may list (text is always read)."""


def validate_input_modalities(value: Any) -> None:
    """``input_modalities`` is a list of distinct names from :data:`INPUT_MODALITIES`."""
    if not isinstance(value, list) or any(item not in INPUT_MODALITIES for item in value):
        raise ValidationError(
            'Give a list of "image" and "pdf" (or an empty list: text only).',
            code="invalid_input_modalities",
        )
    if len(set(value)) != len(value):
        raise ValidationError("Name each modality once.", code="invalid_input_modalities")


class LanguageModel(models.Model):
    """A model offered by a provider, with its limits and prices."""

    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="models")
    model_id = models.CharField(
        max_length=MAX_NAME_LENGTH, help_text="The provider's name for the model."
    )
    name = models.CharField(max_length=200, blank=True)
    context_window = models.PositiveIntegerField(null=True, blank=True)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    input_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    output_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    cached_input_price_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="Empty = the input price.",
    )
    reasoning_price_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="Empty = the output price.",
    )
    web_search_price_per_call = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="What one web search the provider runs costs; empty = unknown (not priced).",
    )
    sampling_parameters = models.JSONField(
        null=True,
        blank=True,
        help_text="The sampling parameters this model accepts, as a list of names "
        '(e.g. ["temperature"]); empty = the adapter\'s default (see docs/providers.md). '
        "Parameters the model does not accept are never sent.",
    )
    input_modalities = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_input_modalities],
        help_text='What the model reads beside text: a list of "image" and "pdf" (e.g. '
        '["image", "pdf"]); empty = text only. A file it cannot read is sent as text '
        "(a PDF's extracted text, a note for an image); see docs/attachments.md.",
    )
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["provider_id", "model_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "model_id"], name="conversations_languagemodel_unique"
            ),
            models.CheckConstraint(
                condition=not_empty("model_id"),
                name="conversations_languagemodel_model_id_not_empty",
            ),
            models.CheckConstraint(
                condition=non_negative(
                    "input_price_per_million",
                    "output_price_per_million",
                    "cached_input_price_per_million",
                    "reasoning_price_per_million",
                    "web_search_price_per_call",
                ),
                name="conversations_languagemodel_prices_non_negative",
            ),
            models.CheckConstraint(
                condition=null_or_json("sampling_parameters", "array"),
                name="conversations_languagemodel_sampling_parameters_array",
            ),
            models.CheckConstraint(
                condition=is_json("input_modalities", "array"),
                name="conversations_languagemodel_input_modalities_array",
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.model_id


class ContextStrategy(models.TextChoices):
    """What a profile's runs do when the history outgrows the model's context window."""

    TRUNCATE = "truncate", "Send the newest whole turns"
    SUMMARIZE = "summarize", "Send a summary of the older turns, then the newest"
    FAIL = "fail", "End the run context_too_large"


class Profile(models.Model):
    """A named way to talk: model, system prompt, sampling, tool policy."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(
        blank=True,
        help_text="What this profile does, in a sentence or two: the description of its tool "
        "agent_<slug> when another profile may call it.",
    )
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
    provider_tools = models.JSONField(
        default=list,
        blank=True,
        help_text='Tools the provider runs itself: a list of "web_search", "code_execution" and '
        '{"type": "file_search", "vector_store_ids": [...]}; the profile\'s adapter must offer '
        "each (see docs/providers.md).",
    )
    tool_choice = models.CharField(
        max_length=64,
        default="auto",
        help_text='"auto", "none", "required" or the name of one tool.',
    )
    approval = models.CharField(
        max_length=16,
        choices=ApprovalPolicy,
        default=ApprovalPolicy.DEFAULT,
        help_text="Approval of tool calls for every tool of this profile; "
        '"default" defers to each tool.',
    )
    retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Conversations whose last message is older than this many days are purged "
        "by manage.py purge_conversations; empty = kept forever.",
    )
    output_schema = models.ForeignKey(
        "conversations.OutputSchema",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="profiles",
        help_text="Runs of this profile end in JSON satisfying this schema unless the "
        "request brings its own; empty = a text answer.",
    )
    stream = models.BooleanField(
        default=True,
        help_text="Stream answers: watchers see the text as it is written (what is stored "
        "is the same either way).",
    )
    agents = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="callers",
        help_text="Profiles this profile may hand a task to: each is offered to the model as "
        "the tool agent_<slug>. No cycle, and no chain deeper than MAX_AGENT_DEPTH.",
    )
    agent_timeout = models.FloatField(
        default=300.0,
        help_text="Seconds a run of this profile may take when another profile calls it as "
        "an agent; a longer one is cancelled and the caller's call answered timed out.",
    )
    context_strategy = models.CharField(
        max_length=16,
        choices=ContextStrategy,
        default=ContextStrategy.TRUNCATE,
        help_text="When the history outgrows the model's context window: send the newest "
        'whole turns ("truncate"), a summary of the older ones before them ("summarize", '
        'written by the summary profile) or end the run context_too_large ("fail"). The '
        "stored history never changes (docs/context.md).",
    )
    summary_profile = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text='The profile that writes summaries for the "summarize" strategy (a small, '
        "cheap model will do); empty: this profile's own.",
    )
    is_active = models.BooleanField(default=True)
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(agent_timeout__gt=0),
                name="conversations_profile_agent_timeout_positive",
            ),
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
                condition=null_or_json("allowed_tools", "array"),
                name="conversations_profile_allowed_tools_list",
            ),
            models.CheckConstraint(
                condition=is_json("provider_tools", "array"),
                name="conversations_profile_provider_tools_list",
            ),
            models.CheckConstraint(
                condition=not_empty("tool_choice"),
                name="conversations_profile_tool_choice_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(temperature__gte=0), name="conversations_profile_temperature_range"
            ),
            models.CheckConstraint(
                condition=Q(approval__in=ApprovalPolicy.values),
                name="conversations_profile_approval_valid",
            ),
            models.CheckConstraint(
                condition=Q(retention_days__gte=1),
                name="conversations_profile_retention_days_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ToolSetting(models.Model):
    """An admin's switch for one registered tool; a disabled tool is offered nowhere."""

    name = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=True)
    approval = models.CharField(
        max_length=16,
        choices=ApprovalPolicy,
        default=ApprovalPolicy.DEFAULT,
        help_text='Approval of this tool\'s calls; "default" defers to its @tool declaration.',
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(approval__in=ApprovalPolicy.values),
                name="conversations_toolsetting_approval_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({'enabled' if self.enabled else 'disabled'})"
