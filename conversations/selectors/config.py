"""Reads of the configuration: the default profile, the active profiles, the usable tools."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.db.models import Q, QuerySet

from conversations.conf import app_settings
from conversations.mcp import sdk_installed
from conversations.models import ApprovalPolicy, Profile, ToolSetting
from conversations.tools import Tool, registry

__all__ = [
    "ToolSettings",
    "active_profiles",
    "available_tools",
    "disabled_tool_names",
    "get_default_profile",
    "tool_settings",
]


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """What the admins' ``ToolSetting`` rows say, as one read of them."""

    disabled: frozenset[str] = frozenset()
    """Names switched off everywhere."""
    approvals: Mapping[str, str] = field(default_factory=dict)
    """Tool name -> its approval policy, for the rows that do not defer (``default``)."""

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, bool, str]]) -> ToolSettings:
        """From ``(name, enabled, approval)`` rows (any others are ignored)."""
        disabled: set[str] = set()
        approvals: dict[str, str] = {}
        for name, enabled, approval in rows:
            if not enabled:
                disabled.add(name)
            if approval != ApprovalPolicy.DEFAULT:
                approvals[name] = approval
        return cls(frozenset(disabled), approvals)


def active_profiles() -> QuerySet[Profile]:
    """Profiles that may be used, with their model and provider selected."""
    return Profile.objects.select_related("language_model__provider").filter(is_active=True)


def get_default_profile() -> Profile | None:
    """The profile named by ``CONVERSATIONS["DEFAULT_PROFILE"]``, else the one marked default."""
    slug = app_settings().DEFAULT_PROFILE
    if slug:
        return active_profiles().filter(slug=slug).first()
    return active_profiles().filter(is_default=True).first()


def disabled_tool_names() -> frozenset[str]:
    """Names an admin switched off everywhere (one query)."""
    return frozenset(ToolSetting.objects.filter(enabled=False).values_list("name", flat=True))


def tool_settings() -> ToolSettings:
    """The rows that switch a tool off or decide its approval (one query)."""
    rows = ToolSetting.objects.filter(
        Q(enabled=False) | ~Q(approval=ApprovalPolicy.DEFAULT)
    ).values_list("name", "enabled", "approval")
    return ToolSettings.from_rows(rows)


def available_tools(
    *, allowed: Iterable[str] | None = None, settings: ToolSettings | None = None
) -> dict[str, Tool]:
    """Registered tools that are enabled and, when ``allowed`` is given, named in it.

    Returned in registration order, keyed by name, followed by the enabled
    tools of MCP servers (when the ``mcp`` extra is installed). ``settings``:
    the tool settings as the caller has just read them (else they are read).
    """
    disabled = disabled_tool_names() if settings is None else settings.disabled
    allowed_set = None if allowed is None else set(allowed)
    tools = list(registry.all())
    if sdk_installed():
        from conversations.mcp.tools import enabled_mcp_tools

        tools += enabled_mcp_tools(taken=registry)
    return {
        tool.name: tool
        for tool in tools
        if tool.name not in disabled and (allowed_set is None or tool.name in allowed_set)
    }
