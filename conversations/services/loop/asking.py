"""Asking the model: one provider request, after the budgets allowed it, as the loop stores it.

The budgets are checked (and the call's estimate reserved) before the
request; the answer is streamed to watchers through ``live`` when the
profile streams, else asked for whole; a request that fails is recorded in
the ledger as failed (giving back its reservation) and raised. A stream that
ended without the provider's usage (stopped, cut at a deadline, broken off
after its first delta) is charged tokens estimated from its text instead,
which settle the reservation as reported usage does; the text a stop or a
deadline cut short is kept as a turn.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.utils import timezone

from conversations.domain import ChatMessage, CompletionResponse, StreamEvent, ToolSpec, Usage
from conversations.domain.estimates import estimate_call, estimate_usage
from conversations.domain.timing import milliseconds
from conversations.exceptions import (
    ConversationsError,
    ProviderError,
    ProviderTimeout,
    RunCancelled,
)
from conversations.providers.base import ChatProvider
from conversations.providers.boundary import check_response
from conversations.providers.options import CompletionOptions
from conversations.providers.streaming import PartialTurn, deltas_of, stream_completion
from conversations.providers.structured import unwrap_output_tool

from ..attachments import prepare_for_model
from ..usage import tracing
from ..usage.budgets import BudgetCheck, check_budgets
from ..usage.ledger import call_cost, record_failed_call
from .context import calibrate, unbounded_window
from .live import CANCELLED_FINISH_REASON, TIMEOUT_FINISH_REASON, Streamed
from .rounds import Round, TurnState
from .summaries import view_with_summary

__all__ = ["Asked", "ask", "cut_short"]


@dataclass(frozen=True, slots=True)
class Asked:
    """One provider request as the loop stores it."""

    response: CompletionResponse
    started_at: datetime
    latency_ms: int
    first_delta_ms: int | None
    """Milliseconds to the first delta of a streamed answer (``None``: not streamed)."""
    cancelled: bool
    """``response`` is the text received before a cancellation cut the stream."""
    budgets: BudgetCheck
    """The check that allowed it: the budgets it is charged to, what it reserved in them."""
    failure: ProviderError | None = None
    """``response`` is the text received before this error (a deadline) cut the stream:
    the loop stores it, then raises this."""
    first_position: int | None = None
    """The first stored position the request sent (its view; ``None``: none)."""
    summary_id: int | None = None
    """The summary the request sent in place of the messages before ``first_position``."""


def ask(round_: Round, state: TurnState, *, shrink: float = 1.0) -> Asked:
    """One provider request, after the budgets allowed it; a failed one is recorded as such.

    Streamed when the profile says so (a provider without ``stream()`` answers
    whole, relayed as one piece); a cancellation that came before any text is
    recorded as a failed request and raised. ``shrink`` (below 1): the vendor
    refused the last view as too long, this one holds at most that share of it.
    When ``state`` has just read that no budget covers the run, none is
    checked; else the check reserves the request's estimated cost (see
    ``usage.budgets``).
    """
    run, provider, live, watch = round_.run, round_.provider, round_.live, round_.watch
    specs, options = round_.request.specs, round_.request.options
    if shrink < 1 and state.context is None:
        state.context = unbounded_window()
    # Chosen before anything is reserved or sent: a history no view fits fails here.
    sent = view_with_summary(round_, state, shrink=shrink)
    name = getattr(provider, "provider_name", "provider")
    # Files as this model and adapter take them (the rest as text), before any network call.
    history = prepare_for_model(
        sent.messages, modalities=round_.request.input_modalities, provider_name=name
    )
    budgets = _reserve(round_, state, history)
    started_at = budgets.started_at
    started = time.monotonic()
    first_delta_ms: int | None = None
    cancelled = False
    failure: ProviderError | None = None
    estimate: Usage | None = None
    try:
        with tracing.chat_span(
            provider=run.provider,
            model=options.model or run.model,
            conversation_id=run.conversation_id,
            messages=history,
        ) as span:
            if live.stream:
                stream, streams = _open_stream(provider, history, specs, options)
                streamed = live.consume(stream, watch=watch, started=started)
                first_delta_ms = streamed.first_delta_ms if streams else None
                if streamed.response is not None:
                    response = streamed.response
                else:
                    estimate = _estimate(streamed, history, specs)
                    failure = _cut_by(streamed)
                    cancelled = failure is None
                    response = cut_short(
                        streamed.partial,
                        model=options.model or run.model,
                        provider=name,
                        usage=estimate,
                        failure=failure,
                    )
            else:
                response = provider.complete(history, tools=specs, options=options)
            if options.output_schema is not None:
                # An answer a vendor could only give as a forced tool's input.
                response = unwrap_output_tool(response)
            # Adapters over HTTP check at their boundary already; any other provider
            # (a scripted or a host's own) is held to the same rules here.
            response = check_response(response, provider=name)
            span.answered(response)
    except Exception as exc:
        code = exc.code if isinstance(exc, ConversationsError) else "internal_error"
        elapsed = milliseconds(time.monotonic() - started)
        record_failed_call(
            run=run,
            started_at=started_at,
            latency_ms=elapsed,
            error_code=code,
            usage=estimate,
            budgets=budgets,
            first_position=sent.first_position,
        )
        raise
    latency_ms = milliseconds(time.monotonic() - started)
    calibrate(state.context, sent, response.usage)
    return Asked(
        response,
        started_at,
        latency_ms,
        first_delta_ms,
        cancelled,
        budgets,
        failure=failure,
        first_position=sent.first_position,
        summary_id=sent.summary.pk if sent.summary is not None else None,
    )


def _cut_by(streamed: Streamed) -> ProviderError | None:
    """The deadline that cut the stream (its text is kept); any other failure is raised."""
    failure = streamed.failure
    if failure is None or isinstance(failure, ProviderTimeout):
        return failure
    raise failure


def _estimate(
    streamed: Streamed, history: Sequence[ChatMessage], specs: Sequence[ToolSpec]
) -> Usage | None:
    """The usage of a stream that ended without the provider's, when the provider had begun.

    A stop or a deadline ends an answer the provider was writing; a failure
    after the first delta broke one off. A request refused before any of that
    (an HTTP error, no connection) is not charged.
    """
    failure = streamed.failure
    refused = failure is not None and not isinstance(failure, ProviderTimeout)
    if refused and streamed.first_delta_ms is None:
        return None
    partial = streamed.partial
    received = [partial.text, partial.reasoning]
    received += [call["name"] + call["arguments"] for call in partial.calls.values()]
    return estimate_usage(sent=history, tools=specs, received=received)


def _reserve(round_: Round, state: TurnState, sent: Sequence[ChatMessage]) -> BudgetCheck:
    """The budget check before a model call, reserving its estimated tokens and cost.

    ``sent`` is what is sent (files loaded or turned into text). Skipped
    when ``state`` has just read that no budget covers the run.
    """
    run = round_.run
    if state.budgets_apply is False:
        return BudgetCheck(timezone.now())
    options = round_.request.options
    tokens = estimate_call(
        sent=sent, tools=round_.request.specs, max_output_tokens=options.max_tokens
    )
    cost = call_cost(usage=tokens, prices=state.prices) if state.prices else None
    reserve = (tokens.prompt_tokens + tokens.completion_tokens, cost or Decimal(0))
    budgets = check_budgets(
        user_id=run.conversation.owner_id, profile_id=run.profile_id, reserve=reserve
    )
    state.budgets_apply = budgets.budgets_apply
    return budgets


def _open_stream(
    provider: ChatProvider,
    history: Sequence[ChatMessage],
    specs: Sequence[ToolSpec],
    options: CompletionOptions,
) -> tuple[Iterator[StreamEvent], bool]:
    """The provider's stream, and whether it really streams (else its whole answer in pieces)."""
    # A class that names ChatProvider as its base inherits a stream() stub that streams nothing.
    if getattr(type(provider), "stream", ChatProvider.stream) is not ChatProvider.stream:
        try:
            return stream_completion(provider, history, tools=specs, options=options), True
        except NotImplementedError:
            pass  # An adapter without its streaming hooks answers whole.
    return deltas_of(provider.complete(history, tools=specs, options=options)), False


def cut_short(
    partial: PartialTurn,
    *,
    model: str,
    provider: str,
    usage: Usage | None = None,
    failure: ProviderError | None = None,
) -> CompletionResponse:
    """The text a cancellation (or the deadline ``failure``) cut short, as a turn: calls still
    arriving are dropped, so the stored history stays one every provider accepts.

    Raises :class:`RunCancelled` (or ``failure``) when there is no text: then
    nothing is stored (the ledger records the request as failed).
    """
    if not partial.text:
        if failure is not None:
            raise failure
        raise RunCancelled("the run was cancelled before the answer began")
    return CompletionResponse(
        content=partial.text,
        model=model,
        usage=usage or Usage(),
        finish_reason=CANCELLED_FINISH_REASON if failure is None else TIMEOUT_FINISH_REASON,
        provider=provider,
    )
