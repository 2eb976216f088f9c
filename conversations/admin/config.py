"""The configuration records in the admin: providers, language models, profiles and tools.

A provider's key is never shown: the admin displays the *reference* and
whether it resolves, and the "test connection" actions report an error's code
and (already redacted) detail with any resolved key scrubbed once more.
"""

from __future__ import annotations

import copy
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import AdminURLFieldWidget
from django.core.exceptions import ValidationError
from django.db.models import OuterRef, Prefetch
from django.utils import timezone
from django.utils.html import format_html

from conversations.domain import ChatMessage
from conversations.exceptions import ConversationsError
from conversations.models import LanguageModel, Profile, Provider, ToolCall, ToolSetting
from conversations.providers.base import TOOL_CHOICE_KEYWORDS, CompletionOptions, redact
from conversations.secrets import resolve
from conversations.services.providers import (
    build_provider,
    completion_options,
    provider_from_record,
)
from conversations.tools import registry

from .display import count_of, pretty_json

__all__ = ["LanguageModelAdmin", "ProfileAdmin", "ProviderAdmin", "ToolSettingAdmin"]

logger = logging.getLogger("conversations.admin")

KEYLESS_ADAPTERS = frozenset({Provider.Adapter.OLLAMA, Provider.Adapter.DEMO})
"""Adapters that work without a key (an empty reference is fine for them)."""

PING_TIMEOUT_SECONDS = 20.0
"""Upper bound on the test request, so an unreachable host does not hang the admin."""

PING_MAX_TOKENS = 16

CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key"}
)
"""Headers that carry a key: stored in extra_headers they would sit in plain text."""

_REFERENCE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _key_resolves(reference: str) -> bool | None:
    """Whether ``reference`` resolves; ``None`` when the resolver itself failed.

    Only a yes/no leaves this function: the value is dropped at once.
    """
    try:
        return resolve(reference) is not None
    except Exception:  # a vault being down must not take the admin page with it
        logger.warning("the secret resolver failed on a provider's key reference", exc_info=True)
        return None


def _safe_detail(exc: ConversationsError, references: list[str]) -> str:
    """The error's detail with every key the references resolve to scrubbed (again)."""
    secrets = []
    for reference in references:
        try:
            secrets.append(resolve(reference))
        except Exception:  # noqa: S112  (nothing to scrub if it cannot resolve)
            continue
    return redact(exc.detail, secrets)


def _ping(adapter: Any, model_id: str, options: CompletionOptions) -> str:
    """Send one tiny request; return a short success text."""
    started = time.monotonic()
    try:
        response = adapter.complete([ChatMessage.user("ping")], options=options)
    finally:
        close = getattr(adapter, "close", None)
        if close is not None:
            close()
    elapsed = int((time.monotonic() - started) * 1000)
    return f"{response.model or model_id} answered in {elapsed} ms"


def _one_attempt(provider: Provider) -> Provider:
    """An unsaved copy of ``provider`` limited to one short request for a test."""
    trial = copy.copy(provider)
    trial.max_retries = 0
    trial.timeout = min(provider.timeout or PING_TIMEOUT_SECONDS, PING_TIMEOUT_SECONDS)
    return trial


# Providers -----------------------------------------------------------------------------


class ProviderForm(forms.ModelForm):
    """Checks JSON shapes and that the key field holds a reference, not a key."""

    base_url = forms.URLField(
        required=False,
        max_length=Provider._meta.get_field("base_url").max_length,
        assume_scheme="https",
        widget=AdminURLFieldWidget,
        help_text="Empty = the vendor's public endpoint (Ollama: http://localhost:11434).",
    )

    class Meta:
        model = Provider
        fields = (
            "name",
            "slug",
            "adapter",
            "base_url",
            "api_key_ref",
            "timeout",
            "max_retries",
            "extra_headers",
            "options",
            "is_active",
        )

    def clean_api_key_ref(self) -> str:
        reference = (self.cleaned_data.get("api_key_ref") or "").strip()
        if not reference:
            return reference
        scheme, _, name = reference.partition(":")
        if not _REFERENCE.fullmatch(reference) or (
            scheme == "env" and not _ENV_NAME.fullmatch(name)
        ):
            # Whatever was typed might be a pasted key: never echo it back.
            self.data = self.data.copy()
            self.data[self.add_prefix("api_key_ref")] = ""
            raise ValidationError(
                'api_key_ref must be a reference such as "env:OPENAI_API_KEY" '
                "(scheme:name), never the key itself. The value was cleared.",
                code="invalid_reference",
            )
        return reference

    def clean_extra_headers(self) -> dict[str, str]:
        value = _json_object(self.cleaned_data.get("extra_headers"), "extra_headers")
        bad = [name for name, item in value.items() if not isinstance(item, str) or not name]
        if bad:
            raise ValidationError(
                "extra_headers must map header names to string values; not a string: %(names)s",
                params={"names": ", ".join(bad)},
                code="invalid_headers",
            )
        credentials = sorted(name for name in value if name.lower() in CREDENTIAL_HEADERS)
        if credentials:
            raise ValidationError(
                "extra_headers must not carry credentials (%(names)s): keys are stored "
                "only as a reference, in api_key_ref.",
                params={"names": ", ".join(credentials)},
                code="credential_header",
            )
        return value

    def clean_options(self) -> dict[str, Any]:
        return _json_object(self.cleaned_data.get("options"), "options")


def _json_object(value: Any, field: str) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            "%(field)s must be a JSON object ({...}), got a JSON %(kind)s.",
            params={"field": field, "kind": _json_kind(value)},
            code="not_an_object",
        )
    return dict(value)


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


class LanguageModelInline(admin.TabularInline):
    model = LanguageModel
    extra = 0
    fields = (
        "model_id",
        "name",
        "context_window",
        "max_output_tokens",
        "input_price_per_million",
        "output_price_per_million",
        "is_active",
    )


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    """Providers: the key *reference* and whether it resolves, never the key."""

    form = ProviderForm
    list_display = (
        "name",
        "slug",
        "adapter",
        "base_url",
        "api_key_ref",
        "key_resolves",
        "is_active",
    )
    list_filter = ("adapter", "is_active")
    search_fields = ("slug", "name", "base_url")
    prepopulated_fields = {"slug": ("name",)}
    readonly_fields = ("key_status", "created_at", "updated_at")
    fields = (
        "name",
        "slug",
        "adapter",
        "base_url",
        "api_key_ref",
        "key_status",
        "timeout",
        "max_retries",
        "extra_headers",
        "options",
        "is_active",
        "created_at",
        "updated_at",
    )
    inlines = (LanguageModelInline,)
    actions = ("test_connection",)

    @admin.display(description="key resolves", boolean=True)
    def key_resolves(self, obj: Provider) -> bool | None:
        if not obj.api_key_ref:
            return None if obj.adapter in KEYLESS_ADAPTERS else False
        return _key_resolves(obj.api_key_ref)

    @admin.display(description="key")
    def key_status(self, obj: Provider) -> str:
        if obj.pk is None or not obj.api_key_ref:
            return "No reference set." + (
                " This adapter needs none." if obj.adapter in KEYLESS_ADAPTERS else ""
            )
        resolves = _key_resolves(obj.api_key_ref)
        if resolves is None:
            return "Unknown: the secret resolver failed (see the log)."
        if resolves:
            return "The reference resolves (the value is never shown)."
        scheme, _, name = obj.api_key_ref.partition(":")
        hint = f" Set the environment variable {name}." if scheme == "env" else ""
        return format_html("<strong>The reference does not resolve.</strong>{}", hint)

    @admin.action(description="Test connection (sends one tiny request)")
    def test_connection(self, request, queryset):
        active_models = LanguageModel.objects.filter(is_active=True).order_by("model_id")
        providers = queryset.prefetch_related(
            Prefetch("models", queryset=active_models, to_attr="active_models")
        )
        for provider in providers:
            label = f'Provider "{provider.slug}"'
            if not provider.active_models:
                self.message_user(
                    request,
                    f"{label}: no active language model to test with; add one first.",
                    messages.WARNING,
                )
                continue
            model = provider.active_models[0]
            try:
                # Building the adapter resolves the key: an unresolvable
                # reference fails here, before anything is sent.
                adapter = provider_from_record(_one_attempt(provider))
                options = CompletionOptions(
                    model=model.model_id,
                    max_tokens=min(PING_MAX_TOKENS, model.max_output_tokens or PING_MAX_TOKENS),
                )
                outcome = _ping(adapter, model.model_id, options)
            except ConversationsError as exc:
                detail = _safe_detail(exc, [provider.api_key_ref])
                self.message_user(request, f"{label}: {exc.code}: {detail}", messages.ERROR)
                continue
            self.message_user(request, f"{label}: connection OK ({outcome}).", messages.SUCCESS)


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
    """Models a provider offers, with limits and prices."""

    list_display = (
        "model_id",
        "name",
        "provider",
        "context_window",
        "max_output_tokens",
        "input_price_per_million",
        "output_price_per_million",
        "is_active",
    )
    list_select_related = ("provider",)
    list_filter = ("provider", "is_active")
    search_fields = ("model_id", "name", "provider__slug")
    autocomplete_fields = ("provider",)


# Profiles ------------------------------------------------------------------------------


class ProfileForm(forms.ModelForm):
    """Checks the tool policy against the registry."""

    class Meta:
        model = Profile
        fields = (
            "name",
            "slug",
            "language_model",
            "system_prompt",
            "temperature",
            "max_tokens",
            "max_iterations",
            "allowed_tools",
            "tool_choice",
            "is_active",
            "is_default",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields.get("language_model")
        if field is not None:
            field.queryset = field.queryset.select_related("provider")
            field.label_from_instance = lambda m: f"{m.provider.name} · {m}"

    def clean_allowed_tools(self) -> list[str] | None:
        value = self.cleaned_data.get("allowed_tools")
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise ValidationError(
                "allowed_tools must be empty (every tool) or a JSON list of tool names, e.g. "
                '["get_weather", "calculate"].',
                code="invalid_allowed_tools",
            )
        unknown = sorted({name for name in value if name not in registry})
        if unknown:
            raise ValidationError(
                "allowed_tools names tools that are not registered: %(names)s. Registered: "
                "%(known)s.",
                params={"names": ", ".join(unknown), "known": ", ".join(registry.names())},
                code="unknown_tool",
            )
        return list(dict.fromkeys(value))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        choice = (cleaned.get("tool_choice") or "").strip()
        if choice and choice not in TOOL_CHOICE_KEYWORDS:
            allowed = cleaned.get("allowed_tools")
            if choice not in registry:
                self.add_error(
                    "tool_choice",
                    ValidationError(
                        'tool_choice must be "auto", "none", "required" or a registered '
                        'tool\'s name; "%(name)s" is none of these.',
                        params={"name": choice},
                        code="unknown_tool",
                    ),
                )
            elif allowed is not None and choice not in allowed:
                self.add_error(
                    "tool_choice",
                    ValidationError(
                        'tool_choice "%(name)s" is not among allowed_tools.',
                        params={"name": choice},
                        code="tool_not_allowed",
                    ),
                )
        return cleaned


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    """Profiles: model, system prompt, sampling and tool policy."""

    form = ProfileForm
    list_display = (
        "name",
        "slug",
        "language_model",
        "provider",
        "temperature",
        "max_iterations",
        "tools",
        "tool_choice",
        "is_active",
        "is_default",
    )
    list_select_related = ("language_model__provider",)
    list_filter = ("is_active", "is_default", "language_model__provider")
    search_fields = ("slug", "name")
    prepopulated_fields = {"slug": ("name",)}
    readonly_fields = ("created_at", "updated_at")
    actions = ("test_connection",)

    @admin.display(description="provider", ordering="language_model__provider__slug")
    def provider(self, obj: Profile) -> str:
        return str(obj.language_model.provider)

    @admin.display(description="tools")
    def tools(self, obj: Profile) -> str:
        if obj.allowed_tools is None:
            return "all"
        return ", ".join(obj.allowed_tools) or "none"

    @admin.action(description="Test connection (sends one tiny request)")
    def test_connection(self, request, queryset):
        """What ``manage.py check_providers --ping`` does, for the selected profiles."""
        for profile in queryset.select_related("language_model__provider"):
            label = f'Profile "{profile.slug}"'
            provider = profile.language_model.provider
            profile.language_model.provider = _one_attempt(provider)
            try:
                adapter = build_provider(profile)
                options = completion_options(profile, tools_offered=False)
                outcome = _ping(adapter, profile.language_model.model_id, options)
            except ConversationsError as exc:
                detail = _safe_detail(exc, [provider.api_key_ref])
                self.message_user(request, f"{label}: {exc.code}: {detail}", messages.ERROR)
                continue
            self.message_user(request, f"{label}: connection OK ({outcome}).", messages.SUCCESS)


# Tools ---------------------------------------------------------------------------------


@admin.register(ToolSetting)
class ToolSettingAdmin(admin.ModelAdmin):
    """The registered tools, each with an on/off switch and how often it was called.

    Opening the list creates the missing switch rows (enabled) for every
    registered tool. Rows cannot be added or deleted by hand: a deleted row of
    a disabled tool would silently come back enabled.
    """

    list_display = ("name", "enabled", "registered", "description", "call_count", "updated_at")
    list_editable = ("enabled",)
    list_filter = ("enabled",)
    search_fields = ("name",)
    actions = ("enable_tools", "disable_tools")
    fields = ("name", "enabled", "registered", "description_full", "parameters", "call_count")
    readonly_fields = ("name", "registered", "description_full", "parameters", "call_count")

    def changelist_view(self, request, extra_context=None):
        ToolSetting.objects.bulk_create(
            [ToolSetting(name=name) for name in registry.names()], ignore_conflicts=True
        )
        return super().changelist_view(request, extra_context)

    def get_queryset(self, request):
        calls = ToolCall.objects.filter(name=OuterRef("name"))
        return super().get_queryset(request).annotate(call_count=count_of(calls, "name"))

    def has_add_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="registered", boolean=True)
    def registered(self, obj: ToolSetting) -> bool:
        return obj.name in registry

    @admin.display(description="description")
    def description(self, obj: ToolSetting) -> str:
        tool = registry.get(obj.name)
        if tool is None:
            return "(no longer registered)"
        first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        return first if len(first) <= 100 else first[:99] + "…"

    @admin.display(description="description")
    def description_full(self, obj: ToolSetting) -> str:
        tool = registry.get(obj.name)
        return format_html("<pre>{}</pre>", tool.description) if tool else "-"

    @admin.display(description="parameters (JSON Schema)")
    def parameters(self, obj: ToolSetting) -> str:
        tool = registry.get(obj.name)
        return format_html("<pre>{}</pre>", pretty_json(tool.parameters)) if tool else "-"

    @admin.display(description="calls", ordering="call_count")
    def call_count(self, obj: ToolSetting) -> int:
        return obj.call_count

    @admin.action(description="Enable the selected tools")
    def enable_tools(self, request, queryset):
        count = queryset.update(enabled=True, updated_at=timezone.now())
        self.message_user(request, f"Enabled {count} tool(s).")

    @admin.action(description="Disable the selected tools")
    def disable_tools(self, request, queryset):
        count = queryset.update(enabled=False, updated_at=timezone.now())
        self.message_user(request, f"Disabled {count} tool(s).")
