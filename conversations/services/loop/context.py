"""Each model call's view of the history: the newest whole turns that fit the context window.

The loop keeps the whole history it read in :class:`~.rounds.TurnState`;
before each call :func:`view_for` chooses what of it is sent (the system
prompt, then the newest whole turns within the budget, see
``domain.context``), in memory: a round pays no statement for it. The run's
:class:`ContextWindow` remembers the estimates of the messages it has sized
and the calibration ratio, which each answered call refines with the input
tokens the provider reported for exactly what it was sent. A profile
without a context window on its model sends the whole history, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from conversations.domain import ChatMessage, Role, ToolSpec, Usage
from conversations.domain.context import (
    FAMILY_TOKEN_FACTORS,
    MAX_RATIO,
    MIN_RATIO,
    Sized,
    View,
    choose_view,
    context_budget,
    estimate_fixed_tokens,
    estimate_message_tokens,
    pair_safe_starts,
    provider_family,
)
from conversations.domain.estimates import DEFAULT_OUTPUT_TOKENS
from conversations.exceptions import ContextTooLarge
from conversations.models import ContextStrategy, ContextSummary, Profile
from conversations.selectors import Reported, TranscriptTail, history_read_bound

__all__ = [
    "ContextWindow",
    "Sent",
    "calibrate",
    "context_window_for",
    "read_bound",
    "stored_part",
    "unbounded_window",
    "view_for",
    "with_summary",
]


SUMMARY_MAX_TOKENS = 1024
"""The most a summary may be (less in a small window: :func:`summary_tokens`)."""

SUMMARY_HEADROOM = 0.6
"""A view cut for a new summary fills this share of its room: the next turns fit beside the
same summary, so one summary serves several turns instead of one each."""

SUMMARY_HEADING = "Summary of the earlier part of this conversation (not sent in full):"


@dataclass(slots=True)
class ContextWindow:
    """A run's context window, and what it has learnt of the sizes of its history."""

    window: int
    """The model's context window, in tokens."""
    output: int
    """The most one call may write (the profile's ``max_tokens``, else the model's)."""
    factor: float
    """The provider family's tokens per estimated token."""
    allow_cut: bool
    """False: the profile's strategy is ``fail`` (a view that drops anything ends the run)."""
    ratio: float = 1.0
    """Reported over estimated input tokens of the last answered call (1.0: none yet)."""
    calibrated: bool = False
    """Whether ``ratio`` comes from a report (else the last call before the run is looked at)."""
    sizes: list[int] = field(default_factory=list)
    """The estimates of the stored messages of the history, in order, as far as sized."""
    last_view: int | None = None
    """The scaled tokens of the stored messages the last view sent (``None``: none yet)."""
    cap: int | None = None
    """At most this many (scaled) tokens of history per view: set when a vendor refused one."""
    summarize: bool = False
    """The profile's strategy is ``summarize``: what a view leaves out is sent as a summary."""
    summary: ContextSummary | None = None
    """The conversation's latest summary, as far as known (read at the run's first cut)."""
    summary_read: bool = False
    """Whether the latest stored summary has been looked for."""
    summary_tokens: int = SUMMARY_MAX_TOKENS
    """The most the next summary may be (what the last view beside one left free for it)."""

    @property
    def scale(self) -> float:
        return self.factor * self.ratio


def context_window_for(profile: Profile | None) -> ContextWindow | None:
    """The run's context window; ``None`` when its model has none (the whole history is sent)."""
    if profile is None:
        return None
    model = profile.language_model
    if not model.context_window:
        return None
    output = profile.max_tokens or model.max_output_tokens or DEFAULT_OUTPUT_TOKENS
    family = provider_family(model.provider.adapter)
    return ContextWindow(
        window=model.context_window,
        output=min(output, model.context_window),
        factor=FAMILY_TOKEN_FACTORS[family],
        allow_cut=profile.context_strategy != ContextStrategy.FAIL,
        summarize=profile.context_strategy == ContextStrategy.SUMMARIZE,
    )


UNBOUNDED = 2**62
"""The window of a model that has none recorded: only a vendor's refusal makes views smaller."""


def unbounded_window() -> ContextWindow:
    """For a run without a context window whose request a vendor refused as too long."""
    return ContextWindow(window=UNBOUNDED, output=0, factor=1.0, allow_cut=True)


def read_bound(profile: Profile | None) -> int | None:
    """The stored estimates the history read must cover: more than any view can hold."""
    return history_read_bound(profile)


@dataclass(frozen=True, slots=True)
class Sent:
    """What one call sends of the history, and what the record of the call says about it."""

    messages: list[ChatMessage]
    """The system prompt, then the stored messages from ``first_position`` on."""
    first_position: int | None
    """The first stored position sent (``None``: no stored message)."""
    estimated: int
    """The estimated input tokens (unscaled) of the request: what calibration divides by."""
    summary: ContextSummary | None = None
    """The summary sent in place of the messages before ``first_position``."""
    summarize_through: int | None = None
    """A summary of the stored messages up to this position is still to be written (then
    sent in the system prompt: :func:`with_summary`)."""


def _system_count(history: Sequence[ChatMessage], profile: Profile | None) -> int:
    # The profile's system prompt heads the history the loop read; it is never stored.
    prompt = profile is not None and bool(profile.system_prompt)
    return 1 if prompt and history and history[0].role is Role.SYSTEM else 0


def stored_part(
    history: list[ChatMessage], tail: TranscriptTail, profile: Profile | None
) -> tuple[list[ChatMessage], int]:
    """The stored messages of the loop's history and the position of the first of them."""
    stored = history[_system_count(history, profile) :]
    return stored, tail.last_position - len(stored) + 1


def view_for(
    *,
    history: list[ChatMessage],
    tail: TranscriptTail,
    profile: Profile | None,
    specs: Sequence[ToolSpec],
    context: ContextWindow | None,
    shrink: float = 1.0,
) -> Sent:
    """The view the next call sends; raises :class:`ContextTooLarge` when none fits.

    ``shrink`` (below 1): a vendor refused the last view as too long; this one holds at most
    that share of its tokens.
    """
    system = _system_count(history, profile)
    stored = history[system:]
    first = tail.last_position - len(stored) + 1
    if context is None:
        return Sent(history, first if stored else None, 0)
    sizes = context.sizes
    sizes.extend(estimate_message_tokens(message) for message in stored[len(sizes) :])
    fixed = estimate_fixed_tokens(system=history[:system], tools=specs)
    if not context.calibrated and tail.reported is not None:
        _calibrate_from(context, tail.reported, first, fixed)
    scale = context.scale
    budget = context_budget(
        context_window=context.window,
        max_output_tokens=context.output,
        fixed_tokens=int(fixed * scale),
    )
    entries = [
        Sized(first + index, message.role, sizes[index], len(message.tool_calls or ()))
        for index, message in enumerate(stored)
    ]
    if shrink < 1:
        # The vendor counts more than the estimate: this view and the run's later ones shrink.
        last = context.last_view
        last = last if last is not None else int(sum(sizes) * scale)
        context.cap = min(context.cap or last, int(last * shrink))
    if context.cap is not None:
        budget = min(budget, context.cap)
    view = choose_view(entries, budget=budget, scale=scale, allow_cut=context.allow_cut)
    summary, through = None, None
    if context.summarize and view.start > 0:
        beside = _summarized_view(context, entries, budget, first)
        if beside is not None:  # else the newest turn leaves no room: truncated, no summary
            view, summary = beside
            through = None if summary is not None else first + view.start - 1
    context.last_view = view.tokens
    sent = [*history[:system], *stored[view.start :]]
    if summary is not None:
        sent = with_summary(sent, system, summary.content)
    estimated = fixed + sum(sizes[view.start :])
    return Sent(sent, first + view.start if stored else None, estimated, summary, through)


def summary_tokens(budget: int) -> int:
    """The most a summary may be beside a view of ``budget`` tokens (a quarter, at most
    :data:`SUMMARY_MAX_TOKENS`): what the view leaves free for it, and what it is asked for."""
    return max(1, min(SUMMARY_MAX_TOKENS, budget // 4))


def _summarized_view(
    context: ContextWindow, entries: list[Sized], budget: int, first: int
) -> tuple[View, ContextSummary | None] | None:
    """The view beside a summary: the stored one while its cut still fits (reused), else one
    with room to grow (so that the next turns reuse the summary written for it); ``None``
    when the newest turn leaves no room for a summary."""
    context.summary_tokens = summary_tokens(budget)
    scale, room = context.scale, budget - int(context.summary_tokens * context.scale)
    summary = context.summary
    if summary is not None:
        start = summary.last_position + 1 - first
        if 0 <= start < len(entries) and start in pair_safe_starts(entries):
            tokens = sum(int(entry.tokens * scale) for entry in entries[start:])
            if tokens <= room:
                return View(start, tokens), summary
    for target in (int(room * SUMMARY_HEADROOM), room):
        try:
            return choose_view(entries, budget=target, scale=scale), None
        except ContextTooLarge:
            continue
    return None


def with_summary(sent: list[ChatMessage], system: int, summary: str) -> list[ChatMessage]:
    """``sent`` with ``summary`` in its system prompt (a system message of its own if none)."""
    text = f"{SUMMARY_HEADING}\n{summary}"
    if system:
        prompt = sent[0].content
        return [ChatMessage.system(f"{prompt}\n\n{text}"), *sent[1:]]
    return [ChatMessage.system(text), *sent]


def _calibrate_from(context: ContextWindow, reported: Reported, first: int, fixed: int) -> None:
    """The ratio from the last call recorded before the run, when its view was read."""
    start, end = reported.first_position - first, reported.answer_position - first
    if 0 <= start <= end <= len(context.sizes):
        _set_ratio(context, reported.prompt_tokens, fixed + sum(context.sizes[start:end]))


def calibrate(context: ContextWindow | None, sent: Sent, usage: Usage) -> None:
    """Refine the ratio with what the provider reported for the view it was just sent."""
    if context is not None and usage.prompt_tokens and not usage.estimated:
        _set_ratio(context, usage.prompt_tokens, sent.estimated)


def _set_ratio(context: ContextWindow, reported: int, estimated: int) -> None:
    if estimated > 0:
        ratio = reported / (estimated * context.factor)
        context.ratio = min(MAX_RATIO, max(MIN_RATIO, ratio))
        context.calibrated = True
