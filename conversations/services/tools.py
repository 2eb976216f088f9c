"""Which tools a run may offer: registered, not disabled by an admin, allowed by the profile."""

from __future__ import annotations

from collections.abc import Iterable

from conversations.models import ToolSetting
from conversations.tools import Tool, registry

__all__ = ["available_tools", "disabled_tool_names"]


def disabled_tool_names() -> frozenset[str]:
    """Names an admin switched off everywhere (one query)."""
    return frozenset(ToolSetting.objects.filter(enabled=False).values_list("name", flat=True))


def available_tools(*, allowed: Iterable[str] | None = None) -> dict[str, Tool]:
    """Registered tools that are enabled and, when ``allowed`` is given, named in it.

    Returned in registration order, keyed by name.
    """
    disabled = disabled_tool_names()
    allowed_set = None if allowed is None else set(allowed)
    return {
        tool.name: tool
        for tool in registry.all()
        if tool.name not in disabled and (allowed_set is None or tool.name in allowed_set)
    }
