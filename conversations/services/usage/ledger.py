"""The usage ledger: one ``ModelCall`` row per provider request, priced when it is recorded.

Prices come from the run's language model, read once per run (by the tool
loop with the statement that starts it, or at its first model call when it
is resumed), and are copied onto each call's row: changing a price applies
from the next run and never rewrites a past cost.
A cost is ``None`` (never 0) when a price the call needed is unknown; totals
count such calls separately.

Charging: uncached prompt tokens at the input price, cached prompt tokens at
the cached input price (the input price when that is blank), completion
tokens that are not reasoning at the output price, reasoning tokens at the
reasoning price (the output price when blank). Cached tokens are part of the
prompt and reasoning tokens part of the completion, so each token is charged
exactly once. Web searches the provider ran itself while answering are
charged per search at the model's ``web_search_price_per_call``; a call
with searches and no such price has no cost (``None``), like a call whose
token price is unknown.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.db.models.signals import post_save, pre_save

from conversations.conf import app_settings
from conversations.domain import Usage
from conversations.models import LanguageModel, Message, ModelCall, Profile, Run

from .. import _sql
from .budgets import BudgetCheck, charge_budgets
from .prices import PRICE_FIELDS, Prices

__all__ = [
    "Prices",
    "call_cost",
    "current_prices",
    "price_call",
    "record_failed_call",
    "record_model_call",
]

_MILLION = Decimal(1_000_000)
_COST_PLACES = Decimal("0.000000001")


def current_prices(*, language_model_id: int | None) -> Prices:
    """The prices a call on that model is charged now (all unknown without a model)."""
    currency = app_settings().CURRENCY
    if language_model_id is None:
        return Prices(currency=currency)
    values = LanguageModel.objects.filter(pk=language_model_id).values(*PRICE_FIELDS).first()
    if values is None:
        return Prices(currency=currency)
    return Prices.from_fields(values, currency=currency)


def call_cost(*, usage: Usage, prices: Prices) -> Decimal | None:
    """What ``usage`` costs at ``prices``; ``None`` when a price it needs is unknown."""
    cached = min(usage.cached_prompt_tokens, usage.prompt_tokens)
    reasoning = min(usage.reasoning_tokens, usage.completion_tokens)
    parts = (
        (usage.prompt_tokens - cached, prices.input),
        (cached, prices.cached_input if prices.cached_input is not None else prices.input),
        (usage.completion_tokens - reasoning, prices.output),
        (reasoning, prices.reasoning if prices.reasoning is not None else prices.output),
    )
    total = Decimal(0)
    for tokens, price in parts:
        if tokens == 0:
            continue
        if price is None:
            return None
        total += tokens * price
    return (total / _MILLION).quantize(_COST_PLACES)


def record_model_call(
    *,
    run: Run,
    started_at: datetime,
    latency_ms: int | None,
    usage: Usage,
    model: str,
    message: Message | None = None,
    error_code: str = "",
    time_to_first_token_ms: int | None = None,
    priced: tuple[Prices, Decimal | None] | None = None,
    run_charged: bool = False,
    budgets: BudgetCheck | None = None,
    web_searches: int = 0,
    first_position: int | None = None,
    context_summary_id: int | None = None,
    for_profile: Profile | None = None,
) -> ModelCall:
    """Insert the ledger row of one provider request and charge the run and its budgets.

    ``web_searches``: how many web searches the provider ran itself (charged
    in ``priced``'s cost by :func:`price_call`).

    ``error_code`` marks a failed request (``message`` is then ``None``);
    ``time_to_first_token_ms`` is known for streamed answers only. Runs
    in one transaction (joining the caller's), so the row, the run's cost and
    the budget counters move together.

    The tool loop, which writes the run's counters in a statement of its own,
    passes what :func:`price_call` returned as ``priced`` and
    ``run_charged=True``, and as ``budgets`` the check the call passed (its
    budgets are charged, its reservation settled; no budgets: none is read).
    ``None``: the budgets covering the call now are read. ``first_position``:
    the first stored position the request sent (its view of the history);
    ``context_summary_id`` the summary it sent in place of older turns.
    ``for_profile``: the call was made with another profile than the run's
    (a summary's): the row names that profile and its model, it is priced at
    that model's prices (when ``priced`` is not given) and, without
    ``budgets``, charged to the budgets covering that profile.
    """
    profile = for_profile if for_profile is not None else run.profile
    if priced is None:
        own_prices = None
        if for_profile is not None:
            own_prices = current_prices(language_model_id=for_profile.language_model_id)
        priced = price_call(run=run, usage=usage, prices=own_prices)
    prices, cost = priced
    user_id = run.conversation.owner_id
    with transaction.atomic(savepoint=False):
        # Counters first: their row locks order this row's ``recorded_at`` after
        # every check that could not see it, and before every check that can.
        charge_budgets(
            user_id=user_id,
            profile_id=for_profile.pk if for_profile is not None else run.profile_id,
            tokens=usage.prompt_tokens + usage.completion_tokens,
            cost=cost,
            run=run,
            budgets=budgets,
        )
        call = ModelCall(
            run=run,
            root_run_id=run.root_run_id or run.pk,
            conversation_id=run.conversation_id,
            user_id=user_id,
            profile=profile,
            message=message,
            provider=run.provider,
            # The model asked for (what prices and totals are about); the one that
            # answered is on the message.
            model=(for_profile.language_model.model_id if for_profile else (run.model or model)),
            started_at=started_at,
            latency_ms=latency_ms,
            time_to_first_token_ms=time_to_first_token_ms,
            first_position=first_position,
            context_summary_id=context_summary_id,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_prompt_tokens=min(usage.cached_prompt_tokens, usage.prompt_tokens),
            reasoning_tokens=min(usage.reasoning_tokens, usage.completion_tokens),
            status=ModelCall.Status.ERROR if error_code else ModelCall.Status.OK,
            error_code=error_code,
            input_price_per_million=prices.input,
            cached_input_price_per_million=prices.cached_input,
            output_price_per_million=prices.output,
            reasoning_price_per_million=prices.reasoning,
            web_search_calls=web_searches,
            web_search_price_per_call=prices.web_search,
            currency=prices.currency,
            cost=cost,
            estimated=usage.estimated,
        )
        _insert(call)
        _charge_run(run, usage, cost, tokens=not run_charged, price=not run_charged)
    return call


def _insert(call: ModelCall) -> None:
    """Insert the ledger row: ``save()``'s signals when anything listens to them, else the
    cached statement of :func:`~conversations.services._sql.insert` (the same row)."""
    if pre_save.has_listeners(ModelCall) or post_save.has_listeners(ModelCall):
        call.save(force_insert=True)
    else:
        _sql.insert([call])


def _charge_run(run: Run, usage: Usage, cost: Decimal | None, *, tokens: bool, price: bool) -> None:
    """Add a call to the run's counters (those the caller has not added), in one ``UPDATE``.

    A failed call's tokens are an estimate when there are any: they count
    like reported ones, so the run's usage is never zero for a call that was charged.
    """
    counts = {name: count for name, count in usage.to_dict().items() if tokens and count}
    changes: dict[str, Any] = {name: F(name) + count for name, count in counts.items()}
    if usage.estimated:
        changes["estimated_calls"] = F("estimated_calls") + 1
    if price and cost is None:
        changes["unpriced_calls"] = F("unpriced_calls") + 1
    elif price:
        changes["cost"] = Coalesce(F("cost"), Value(Decimal(0))) + cost
    if not changes:
        return
    Run.objects.filter(pk=run.pk).update(**changes)
    for name, count in counts.items():
        setattr(run, name, getattr(run, name) + count)
    run.estimated_calls += int(usage.estimated)
    if price and cost is None:
        run.unpriced_calls += 1
    elif price and cost is not None:
        run.cost = (run.cost or Decimal(0)) + cost


def price_call(
    *, run: Run, usage: Usage, prices: Prices | None = None, web_searches: int = 0
) -> tuple[Prices, Decimal | None]:
    """The prices a call of ``run`` is charged and what ``usage`` (and ``web_searches``
    searches the provider ran) cost at them.

    ``prices`` as the run read them already (the tool loop reads them once per
    run); else the language model's prices now (one query).
    """
    if prices is None:
        profile = run.profile
        prices = current_prices(language_model_id=profile.language_model_id if profile else None)
    cost = call_cost(usage=usage, prices=prices)
    if web_searches:
        if cost is None or prices.web_search is None:
            return prices, None
        cost = (cost + web_searches * prices.web_search).quantize(_COST_PLACES)
    return prices, cost


def record_failed_call(
    *,
    run: Run,
    started_at: datetime,
    latency_ms: int,
    error_code: str,
    usage: Usage | None = None,
    budgets: BudgetCheck | None = None,
    first_position: int | None = None,
    for_profile: Profile | None = None,
) -> ModelCall:
    """The ledger row of a request that got no usable answer.

    ``usage``: an estimate when the provider had begun to answer (see
    :func:`~conversations.domain.estimates.estimate_usage`); else no tokens
    are known. It is charged to the run and its budgets like any usage.
    ``budgets``: the check the request passed; what it reserved is settled
    against ``usage`` (released in full when there is none). ``for_profile``:
    the request was made with another profile than the run's (a summary's),
    as :func:`record_model_call` takes it.
    """
    return record_model_call(
        run=run,
        started_at=started_at,
        latency_ms=latency_ms,
        usage=usage or Usage(),
        model="",
        error_code=error_code or "error",
        budgets=budgets,
        first_position=first_position,
        for_profile=for_profile,
    )
