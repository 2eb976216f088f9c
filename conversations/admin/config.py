"""The configuration records in the admin: providers, language models, profiles and tools.

A provider's key is never shown: the admin displays the *reference* and
whether it resolves, and the "test connection" actions report the outcome of
:func:`~conversations.services.configuration.providers.check_connection` (an error's code
and its detail, with any resolved key scrubbed once more). The forms live in
:mod:`.forms`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypedDict

from django.contrib import admin, messages
from django.db.models import OuterRef
from django.utils import timezone
from django.utils.html import format_html

from conversations.models import LanguageModel, Profile, Provider, ToolCall, ToolSetting
from conversations.secrets import resolve
from conversations.services.approvals import resolve_approval_level
from conversations.services.configuration import (
    KEYLESS_ADAPTERS,
    ConnectionCheck,
    check_connection,
)
from conversations.tools import registry

from .columns import titled
from .display import count_of, pretty_json
from .forms import LanguageModelForm, ProfileForm, ProviderForm, temperature_warning

__all__ = ["LanguageModelAdmin", "ProfileAdmin", "ProviderAdmin", "ToolSettingAdmin"]

logger = logging.getLogger("conversations.admin")

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _CallCount(TypedDict):
    """What ``ToolSettingAdmin.get_queryset`` annotates each row with."""

    call_count: int


def _key_resolves(reference: str) -> bool | None:
    """Whether ``reference`` resolves; ``None`` when the resolver itself failed.

    Only a yes/no leaves this function: the value is dropped at once.
    """
    try:
        return resolve(reference) is not None
    except Exception:  # a vault being down must not take the admin page with it
        logger.warning("the secret resolver failed on a provider's key reference", exc_info=True)
        return None


# Providers -----------------------------------------------------------------------------


class LanguageModelInline(admin.TabularInline):
    """A provider's models, in a row each that fits the form (provider_change_form.html).

    The fields a provider's page needs at a glance; output limits, the other
    prices and the sampling parameters are on each model's own page (the
    row's change link).
    """

    model = LanguageModel
    form = LanguageModelForm
    extra = 0
    show_change_link = True
    fields = (
        "model_id",
        "name",
        "context_window",
        "input_price_per_million",
        "output_price_per_million",
        "is_active",
    )


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    """Providers: the key *reference* and whether it resolves, never the key."""

    form = ProviderForm
    change_form_template = "conversations/admin/provider_change_form.html"
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
        "max_stream_seconds",
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
        for provider in queryset:
            report(
                self, request, f'Provider "{provider.slug}"', check_connection(provider=provider)
            )


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
    """Models a provider offers, with limits, prices and the sampling parameters they accept."""

    form = LanguageModelForm
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
            report(self, request, f'Profile "{profile.slug}"', check_connection(profile=profile))

    def save_model(self, request, obj: Profile, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        warning = temperature_warning(obj)
        if warning:
            self.message_user(request, warning, messages.WARNING)


def report(model_admin: admin.ModelAdmin, request: Any, label: str, check: ConnectionCheck) -> None:
    """One admin message per checked record: success, warning (skipped) or error."""
    if check.ok:
        model_admin.message_user(request, f"{label}: connection OK ({check.detail}).")
    elif check.status == "skipped":
        model_admin.message_user(request, f"{label}: {check.detail}", messages.WARNING)
    else:
        model_admin.message_user(request, f"{label}: {check.code}: {check.detail}", messages.ERROR)


# Tools ---------------------------------------------------------------------------------


@admin.register(ToolSetting)
class ToolSettingAdmin(admin.ModelAdmin):
    """The registered tools, each with an on/off switch and how often it was called.

    Opening the list creates the missing switch rows (enabled) for every
    registered tool. Rows cannot be added or deleted by hand: a deleted row of
    a disabled tool would silently come back enabled.
    """

    # Few, narrow columns in a fixed layout (fits 1280 px beside the navigation and the
    # filters); whether a tool is still registered shows in its description.
    change_list_template = "conversations/admin/toolsetting_change_list.html"
    list_display = ("name", "enabled", "approval_summary", "description", "call_count")
    list_editable = ("enabled",)
    list_filter = ("enabled", "approval")
    search_fields = ("name",)
    actions = ("enable_tools", "disable_tools")
    fields = (
        "name",
        "enabled",
        "approval",
        "approval_applies",
        "registered",
        "description_full",
        "parameters",
        "call_count",
    )
    readonly_fields = (
        "name",
        "approval_applies",
        "registered",
        "description_full",
        "parameters",
        "call_count",
    )

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

    @admin.display(description="who approves (unless a profile overrides)")
    def approval_applies(self, obj: ToolSetting) -> str:
        tool = registry.get(obj.name)
        if tool is None:
            return "-"
        level = resolve_approval_level(profile=None, setting=obj.approval, tool=tool)
        return {"owner": "the owner", "staff": "staff"}.get(level or "", "nobody")

    @admin.display(description="approval", ordering="approval")
    def approval_summary(self, obj: ToolSetting) -> str:
        who = self.approval_applies(obj)
        return titled(
            f"{obj.approval} → {who}",
            f"{obj.get_approval_display()}; who approves unless a profile overrides: {who}",
        )

    @admin.display(description="registered", boolean=True)
    def registered(self, obj: ToolSetting) -> bool:
        return obj.name in registry

    @admin.display(description="description")
    def description(self, obj: ToolSetting) -> str:
        tool = registry.get(obj.name)
        if tool is None:
            return "(no longer registered)"
        first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        return titled(first if len(first) <= 100 else first[:99] + "…", first)

    @admin.display(description="description")
    def description_full(self, obj: ToolSetting) -> str:
        tool = registry.get(obj.name)
        return format_html("<pre>{}</pre>", tool.description) if tool else "-"

    @admin.display(description="parameters (JSON Schema)")
    def parameters(self, obj: ToolSetting) -> str:
        tool = registry.get(obj.name)
        return format_html("<pre>{}</pre>", pretty_json(tool.parameters)) if tool else "-"

    @admin.display(description="calls", ordering="call_count")
    def call_count(self, obj: WithAnnotations[ToolSetting, _CallCount]) -> int:
        return obj.call_count

    @admin.action(description="Enable the selected tools")
    def enable_tools(self, request, queryset):
        count = queryset.update(enabled=True, updated_at=timezone.now())
        self.message_user(request, f"Enabled {count} tool(s).")

    @admin.action(description="Disable the selected tools")
    def disable_tools(self, request, queryset):
        count = queryset.update(enabled=False, updated_at=timezone.now())
        self.message_user(request, f"Disabled {count} tool(s).")
