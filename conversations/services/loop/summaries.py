"""Summaries for the ``summarize`` strategy: the turns a view leaves out, written by a model.

When a view of a ``summarize`` profile leaves turns out and no stored
summary ends just before its cut, :func:`write_summary` asks the profile's
``summary_profile`` (else the profile itself) to summarise them (the
previous summary and the messages after it, so each summary call reads only
what the cut newly passed), records the call in the ledger under that
profile's model and prices, and stores a :class:`ContextSummary` with the
positions it covers. The summary is sent in the system prompt and reused
by every later call whose cut has not moved (see ``context``).

The summary call is a model call like the loop's others (``asking``): the
budgets covering the conversation's owner and the summarising profile are
checked before it, reserving its estimate at that profile's prices (a used-up
one raises :class:`~conversations.exceptions.BudgetExceeded`: nothing is
sent or stored, and the run ends ``budget_exhausted``), and charged with
what it used when it is recorded. A request that fails is recorded in the
ledger as failed (giving its reservation back) and raised: the run ends as a
failed request of the loop ends it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from conversations.domain import ChatMessage, CompletionResponse, Role
from conversations.domain.estimates import estimate_call
from conversations.domain.timing import milliseconds
from conversations.exceptions import ConversationsError
from conversations.models import ContextSummary, Message, Profile, Run
from conversations.providers.base import ChatProvider
from conversations.providers.options import CompletionOptions

from ..configuration.providers import build_provider, close_provider, completion_options
from ..usage.budgets import BudgetCheck, check_budgets
from ..usage.ledger import Prices, call_cost, current_prices, record_failed_call, record_model_call
from .context import ContextWindow, Sent, stored_part, view_for
from .rounds import Round, TurnState

__all__ = ["SUMMARY_INSTRUCTION", "latest_summary", "view_with_summary", "write_summary"]

SUMMARY_INSTRUCTION = (
    "You write the summary that stands in for the earlier part of a conversation between a "
    "user and an assistant, which will not be sent again. Keep what the rest of the "
    "conversation may need: facts, names, numbers, decisions, what tools returned, open "
    "questions. Be brief. Answer with the summary only."
)

MAX_INPUT_CHARACTERS = 200_000
"""The most of the transcript one summary call reads (its newest part)."""


def latest_summary(*, conversation_id: Any) -> ContextSummary | None:
    """The conversation's summary that covers the most (one indexed query)."""
    return (
        ContextSummary.objects.filter(conversation_id=conversation_id)
        .order_by("-last_position")
        .first()
    )


def _line(message: ChatMessage) -> str:
    text = message.content
    for call in message.tool_calls or ():
        text += f"\n[called {call.name} {call.raw_arguments or call.arguments_json}]"
    role = "tool result" if message.role is Role.TOOL else message.role.value
    return f"{role}: {text}"


def _transcript(
    conversation_id: Any, stored: Sequence[ChatMessage], first: int, start: int, through: int
) -> str:
    """Positions ``start..through`` as lines: from memory where the run holds them, else read."""
    lines = [_line(m) for m in stored[max(0, start - first) : max(0, through - first + 1)]]
    if start < first:
        older = (
            Message.objects.filter(
                conversation_id=conversation_id, position__gte=start, position__lt=first
            )
            .order_by("position")
            .values_list("role", "content")
        )
        lines = [f"{role}: {content}" for role, content in older] + lines
    text = "\n\n".join(lines)
    return text[-MAX_INPUT_CHARACTERS:]


def _reserve(
    run: Run,
    summarizer: Profile,
    sent: Sequence[ChatMessage],
    options: CompletionOptions,
    prices: Prices,
    *,
    skip: bool,
) -> BudgetCheck:
    """The budget check before the summary call, reserving its estimate at ``prices``.

    Raises :class:`~conversations.exceptions.BudgetExceeded` (nothing
    reserved) when a blocking budget covering the owner or ``summarizer`` is
    used up. ``skip``: the run has just read that no budget covers it (and the
    summary is its own profile's).
    """
    if skip:
        return BudgetCheck(timezone.now())
    tokens = estimate_call(sent=sent, max_output_tokens=options.max_tokens)
    cost = call_cost(usage=tokens, prices=prices)
    return check_budgets(
        user_id=run.conversation.owner_id,
        profile_id=summarizer.pk,
        reserve=(tokens.prompt_tokens + tokens.completion_tokens, cost or Decimal(0)),
    )


def _ask(
    run: Run,
    provider: ChatProvider,
    messages: Sequence[ChatMessage],
    options: CompletionOptions,
    budgets: BudgetCheck,
    summarizer: Profile,
) -> tuple[CompletionResponse, int]:
    """The summary call and its latency; a failed one is recorded in the ledger and raised."""
    started = time.monotonic()
    try:
        response = provider.complete(messages, tools=[], options=options)
    except Exception as exc:
        record_failed_call(
            run=run,
            started_at=budgets.started_at,
            latency_ms=milliseconds(time.monotonic() - started),
            error_code=exc.code if isinstance(exc, ConversationsError) else "internal_error",
            budgets=budgets,
            for_profile=summarizer,
        )
        raise
    return response, milliseconds(time.monotonic() - started)


def write_summary(
    *,
    round_: Round,
    context: ContextWindow,
    stored: Sequence[ChatMessage],
    first: int,
    through: int,
    budgets_apply: bool | None = None,
) -> ContextSummary:
    """Summarise the stored messages up to ``through`` (``stored`` starts at position ``first``),
    record the call and store the summary; it becomes ``context.summary``.

    The budgets are checked first (raising ``BudgetExceeded`` before anything
    is sent), unless ``budgets_apply`` is ``False`` (the run has just read
    that none covers it) and the summary is the run's profile's own. A failed
    request is recorded as failed and raised; no summary is stored.
    """
    run = round_.run
    profile = run.profile
    assert profile is not None  # a summarize strategy is a profile's
    summarizer: Profile = profile.summary_profile or profile
    previous = (
        context.summary if context.summary and context.summary.last_position < through else None
    )
    start = previous.last_position + 1 if previous else 0
    text = _transcript(run.conversation_id, stored, first, start, through)
    if previous is not None:
        text = f"The summary so far:\n{previous.content}\n\nWhat followed:\n{text}"
    messages = [ChatMessage.system(SUMMARY_INSTRUCTION), ChatMessage.user(text)]
    options = dataclasses.replace(
        completion_options(summarizer, tools_offered=False), max_tokens=context.summary_tokens
    )
    own = summarizer.pk == profile.pk
    prices = current_prices(language_model_id=summarizer.language_model_id)
    provider = round_.provider if own else build_provider(summarizer)
    try:
        skip = own and budgets_apply is False
        budgets = _reserve(run, summarizer, messages, options, prices, skip=skip)
        response, latency_ms = _ask(run, provider, messages, options, budgets, summarizer)
    finally:
        if not own:
            close_provider(provider)
    with transaction.atomic():
        call = record_model_call(
            run=run,
            started_at=budgets.started_at,
            latency_ms=latency_ms,
            usage=response.usage,
            model=response.model,
            priced=(prices, call_cost(usage=response.usage, prices=prices)),
            budgets=budgets,
            for_profile=summarizer,
        )
        summary = ContextSummary.objects.create(
            conversation_id=run.conversation_id,
            first_position=0,
            last_position=through,
            content=response.content.strip(),
            profile=summarizer,
            model=response.model,
            model_call=call,
        )
    context.summary = summary
    return summary


def view_with_summary(round_: Round, state: TurnState, *, shrink: float = 1.0) -> Sent:
    """The next call's view (:func:`~.context.view_for`); with the ``summarize`` strategy, the
    summary it needs is looked up (once per run) or written first."""
    profile, context = round_.run.profile, state.context

    def view(shrink: float = 1.0) -> Sent:
        return view_for(
            history=state.history,
            tail=state.tail,
            profile=profile,
            specs=round_.request.specs,
            context=context,
            shrink=shrink,
        )

    sent = view(shrink)
    if sent.summarize_through is None or context is None:
        return sent
    if not context.summary_read:
        context.summary_read = True
        context.summary = latest_summary(conversation_id=round_.run.conversation_id)
        if context.summary is not None:
            sent = view()
            if sent.summarize_through is None:
                return sent
    stored, first = stored_part(state.history, state.tail, profile)
    assert sent.summarize_through is not None
    write_summary(
        round_=round_,
        context=context,
        stored=stored,
        first=first,
        through=sent.summarize_through,
        budgets_apply=state.budgets_apply,
    )
    return view()
