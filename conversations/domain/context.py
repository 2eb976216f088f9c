"""Context windows: how big each message is, and which newest whole turns one call can hold.

The stored history is never rewritten to fit a model. Each call sends a
*view* of it: the system prompt, then the newest whole turns that fit the
budget (the context window, less the most the call may write, less a safety
margin, less the system prompt and the tool definitions). The cut is made
only where nothing is split: at the start of the conversation or at a user
message with no call still waiting for its result before it (the rule a
branch's cut follows), so a view never holds a result without its call nor a
call without its result.

Sizes are estimates made offline, written once with each stored message
(:func:`estimate_message_tokens`, no tokenizer is fetched), scaled per
provider family (:data:`FAMILY_TOKEN_FACTORS`) and calibrated by what the
provider reported for the last call (``ratio``). Pure Python, no Django.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from conversations.exceptions import ContextTooLarge

from .estimates import estimate_tokens
from .messages import ChatMessage, Role
from .tools import ToolSpec

__all__ = [
    "FAMILY_TOKEN_FACTORS",
    "MAX_RATIO",
    "MESSAGE_OVERHEAD_TOKENS",
    "MIN_RATIO",
    "Sized",
    "View",
    "choose_view",
    "context_budget",
    "estimate_fixed_tokens",
    "estimate_message_tokens",
    "pair_safe_starts",
    "provider_family",
]

MESSAGE_OVERHEAD_TOKENS = 4
"""What the wire adds to every message (role, separators), in tokens."""

FAMILY_TOKEN_FACTORS = {"openai": 1.0, "anthropic": 1.15, "gemini": 1.0, "ollama": 1.1}
"""How many tokens a family's tokenizers make of one estimated token, before calibration."""

MIN_RATIO, MAX_RATIO = 0.5, 2.0
"""The bounds of a calibration ratio (reported / estimated): a report outside them is noise."""

SAFETY_SHARE, SAFETY_MIN = 0.05, 64
"""The safety margin left free in every window: 5 % of it, at least 64 tokens."""


def provider_family(adapter: str) -> str:
    """The tokenizer family of a provider adapter (``openai`` for every OpenAI-shaped one)."""
    return adapter if adapter in FAMILY_TOKEN_FACTORS else "openai"


def history_read_bound(*, context_window: int, max_output_tokens: int, family: str) -> int:
    """The stored estimates a history read must cover: more than any view of the window can
    hold, whatever the calibration (it scales estimates by :data:`MIN_RATIO` at the least)."""
    room = context_window - min(max_output_tokens, context_window)
    return int(room / (FAMILY_TOKEN_FACTORS[family] * MIN_RATIO)) + 1


def estimate_message_tokens(message: ChatMessage) -> int:
    """About how many tokens ``message`` is on the wire: its text, its calls, the overhead."""
    text = message.content
    for call in message.tool_calls or ():
        text += call.id + call.name + (call.raw_arguments or call.arguments_json)
    if message.tool_call_id:
        text += message.tool_call_id
    return estimate_tokens(text) + MESSAGE_OVERHEAD_TOKENS


def estimate_fixed_tokens(*, system: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> int:
    """What every call of a run sends whatever the view: the system prompt and the tools."""
    specs = json.dumps([spec.to_dict() for spec in tools], ensure_ascii=False) if tools else ""
    return sum(estimate_message_tokens(m) for m in system) + estimate_tokens(specs)


def context_budget(*, context_window: int, max_output_tokens: int, fixed_tokens: int) -> int:
    """The tokens the history may take in one call (may be negative: nothing fits)."""
    margin = max(SAFETY_MIN, int(context_window * SAFETY_SHARE))
    return context_window - max_output_tokens - margin - fixed_tokens


@dataclass(frozen=True, slots=True)
class Sized:
    """One stored message as choosing a view sees it."""

    position: int
    role: Role
    tokens: int
    """Its estimate (before the family factor and the calibration)."""
    calls: int = 0
    """How many calls it makes (an assistant message)."""


@dataclass(frozen=True, slots=True)
class View:
    """Which of the history's messages a call sends."""

    start: int
    """Index of the first message sent (0: the whole history)."""
    tokens: int
    """About how many tokens those messages are (scaled)."""


def pair_safe_starts(entries: Sequence[Sized]) -> list[int]:
    """The indexes a view may start at: the first message, and each user message that no
    unanswered call precedes (a branch's cut rule, seen from the other side)."""
    starts, open_calls = [0] if entries else [], 0
    for index, entry in enumerate(entries):
        if index and entry.role is Role.USER and open_calls == 0:
            starts.append(index)
        if entry.role is Role.TOOL:
            open_calls = max(0, open_calls - 1)
        open_calls += entry.calls
    return starts


def choose_view(
    entries: Sequence[Sized], *, budget: int, scale: float = 1.0, allow_cut: bool = True
) -> View:
    """The view of ``entries`` (oldest first) with the most newest whole turns within ``budget``.

    ``scale``: the family factor times the calibration ratio. Raises
    :class:`ContextTooLarge` when even the newest turn does not fit (naming
    the largest message in it, with its position and size), or when a cut is
    needed and ``allow_cut`` is false (the profile's strategy is ``fail``).
    """
    sizes = [int(entry.tokens * scale) for entry in entries]
    total = sum(sizes)
    if total <= budget:
        return View(0, total)
    if not allow_cut:
        raise ContextTooLarge(
            f"the history is about {total} tokens and the budget is {budget}; "
            "the profile's context strategy is fail",
            position=entries[0].position if entries else None,
            tokens=total,
        )
    suffix = total
    best: View | None = None
    starts = pair_safe_starts(entries)
    start_set = set(starts)
    for index, size in enumerate(sizes):
        if index in start_set and suffix <= budget:
            best = View(index, suffix)
            break
        suffix -= size
    if best is not None:
        return best
    newest = starts[-1] if starts else 0
    largest = max(range(newest, len(entries)), key=lambda i: sizes[i], default=None)
    if largest is not None and sizes[largest] > budget:
        entry = entries[largest]
        raise ContextTooLarge(
            f"the message at position {entry.position} is about {sizes[largest]} tokens, "
            f"more than the {budget} one call may send",
            position=entry.position,
            tokens=sizes[largest],
        )
    first = entries[newest] if entries else None
    raise ContextTooLarge(
        f"the newest turn (from position {first.position if first else 0}) is about "
        f"{sum(sizes[newest:])} tokens, more than the {budget} one call may send",
        position=first.position if first else None,
        tokens=sum(sizes[newest:]),
    )
