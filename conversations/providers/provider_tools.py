"""Tools the provider runs itself: which adapter offers which, and the one refusal of the rest.

Each adapter names the kinds it can offer in ``provider_tool_kinds`` (the
Responses API: web search, code interpreter and file search; Anthropic: its
web search and code execution server tools; Gemini: Google Search grounding
and code execution; the others none) and maps them to its vendor's form in
its own module (:mod:`.openai_responses_tools`, :mod:`.anthropic_server_tools`,
:mod:`.gemini_grounding`). A profile asking an adapter for a kind it does not
offer is refused by :func:`require_provider_tools`, naming the tool and the
adapter, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from conversations.domain import InvalidArgumentError, ProviderTool

__all__ = ["require_provider_tools", "unsupported_provider_tools"]


def unsupported_provider_tools(
    supported: Collection[str], tools: Sequence[ProviderTool]
) -> list[str]:
    """The kinds of ``tools`` outside ``supported``, in order."""
    return [tool.kind for tool in tools if tool.kind not in supported]


def require_provider_tools(
    adapter: str, supported: Collection[str], tools: Sequence[ProviderTool]
) -> None:
    """Raise :class:`InvalidArgumentError` (``unsupported_provider_tool``) for a tool the adapter
    cannot offer."""
    missing = unsupported_provider_tools(supported, tools)
    if missing:
        offered = ", ".join(sorted(supported)) or "none"
        raise InvalidArgumentError(
            f'the {adapter} adapter cannot offer the provider tool "{missing[0]}" '
            f"(it offers: {offered})",
            code="unsupported_provider_tool",
            field="provider_tools",
        )
