"""Prompt caching on the wire: where a request marks the prefix its next request will repeat.

A conversation's next request starts with everything this one sends (the
tools, the system prompt, the messages), then adds the answer and what
follows. Anthropic caches a prefix only up to a ``cache_control``
breakpoint, at most four per request: :func:`mark_cache_breakpoints` sets
three, on the last tool definition, the system prompt and the last block of
the last message. The marks exist in the request body alone: they are never
stored with the history nor shown by the export. OpenAI caches prefixes by
itself; a stable ``prompt_cache_key`` per conversation (set by the loop)
routes its requests to the same cache.
"""

from __future__ import annotations

from typing import Any, Final

from .options import CompletionOptions

__all__ = ["CACHE_CONTROL", "MAX_BREAKPOINTS", "mark_cache_breakpoints", "with_cache_breakpoints"]

CACHE_CONTROL: Final = {"type": "ephemeral"}
"""Anthropic's breakpoint: the prefix up to and including the marked block is cached."""

MAX_BREAKPOINTS: Final = 4
"""Anthropic refuses a request with more ``cache_control`` marks than this."""

_UNMARKABLE: Final = frozenset({"thinking", "redacted_thinking"})
"""Blocks that cannot carry a mark themselves."""


def _marked(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": dict(CACHE_CONTROL)}


def mark_cache_breakpoints(payload: dict[str, Any]) -> None:
    """Mark the tools, the system prompt and the last message of an Anthropic body, in place.

    Copies what it marks (the body's blocks may be shared with the caller's
    values); the system prompt becomes one text block. Marks already present
    (through ``options.extra``) count towards :data:`MAX_BREAKPOINTS`.
    """
    budget = MAX_BREAKPOINTS - _count(payload)
    tools = payload.get("tools")
    if budget > 0 and isinstance(tools, list) and tools:
        payload["tools"] = [*tools[:-1], _marked(tools[-1])]
        budget -= 1
    system = payload.get("system")
    if budget > 0 and isinstance(system, str) and system:
        payload["system"] = [_marked({"type": "text", "text": system})]
        budget -= 1
    messages = payload.get("messages")
    if budget > 0 and isinstance(messages, list) and messages:
        last = messages[-1]
        content = last.get("content")
        if isinstance(content, str) and content:
            content = [{"type": "text", "text": content}]
        if isinstance(content, list):
            index = next(
                (
                    i
                    for i in reversed(range(len(content)))
                    if content[i].get("type") not in _UNMARKABLE
                ),
                None,
            )
            if index is not None:
                content = [*content[:index], _marked(content[index]), *content[index + 1 :]]
                messages[-1] = {**last, "content": content}


def _count(value: Any) -> int:
    """The ``cache_control`` marks already in ``value``."""
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(_count(item) for item in value.values())
    if isinstance(value, list):
        return sum(_count(item) for item in value)
    return 0


def with_cache_breakpoints(payload: dict[str, Any], options: CompletionOptions) -> dict[str, Any]:
    """An Anthropic body finished: ``options.extra`` merged, then, when ``options.cache_key``
    asks for caching, its breakpoints marked (marks the extra brought count towards the four)."""
    payload.update(options.extra)
    if options.cache_key is not None:
        mark_cache_breakpoints(payload)
    return payload
