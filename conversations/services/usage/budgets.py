"""Budgets: check them before every model call, charge them with every recorded call.

Each budget has one counter row per period. :func:`check_budgets` is the one
check, made before anything is stored for a message (posting, editing,
regenerating: the counters are read) and before every model call of the
tool loop. There it reserves the call's estimated cost: when a blocking
budget applies, one upsert adds the estimate to the counters of the budgets
that apply, under their row locks (taken in budget order, so two runs never
deadlock), and the call is
refused, and nothing reserved, when a counter had reached its limit before
it. :func:`charge_budgets` replaces the reservation by what the call used,
in the transaction that inserts its ``ModelCall`` row. Concurrent calls
therefore see each other as spent from the moment they were allowed, and a
budget is overspent by at most the last allowed call (by more only when calls
use more than their estimate). A call whose record is never written (its
process died) keeps its reservation: the error is on the safe side.

Periods are calendar periods in UTC: a ``day`` starts at midnight, a ``week``
on Monday, a ``month`` on its first; a ``total`` budget has one period that
never ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from conversations import signals
from conversations.exceptions import BudgetExceeded
from conversations.models import Budget, BudgetCounter, Run

from .. import _sql

__all__ = [
    "BudgetCheck",
    "BudgetStatus",
    "applicable_budgets",
    "budget_statuses",
    "charge_budgets",
    "check_budgets",
    "period_bounds",
]

_TOTAL_START = datetime(2000, 1, 1, tzinfo=UTC)
"""The one period of a ``total`` budget starts here (any fixed instant would do)."""


def period_bounds(*, period: str, at: datetime) -> tuple[datetime, datetime | None]:
    """Start and end (``None``: never) of the ``period`` containing ``at``, in UTC."""
    at = at.astimezone(UTC)
    midnight = at.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == Budget.Period.DAY:
        return midnight, midnight + timedelta(days=1)
    if period == Budget.Period.WEEK:
        start = midnight - timedelta(days=midnight.weekday())
        return start, start + timedelta(days=7)
    if period == Budget.Period.MONTH:
        start = midnight.replace(day=1)
        following = (start + timedelta(days=32)).replace(day=1)
        return start, following
    if period == Budget.Period.TOTAL:
        return _TOTAL_START, None
    raise ValueError(f"unknown budget period {period!r}")


def applicable_budgets(*, user_id: Any, profile_id: int | None) -> list[Budget]:
    """The active budgets covering a call by ``user_id`` on ``profile_id``, in a fixed order."""
    scope = Q(scope=Budget.Scope.GLOBAL) | Q(scope=Budget.Scope.USER, user_id=user_id)
    if profile_id is not None:
        scope |= Q(scope=Budget.Scope.PROFILE, profile_id=profile_id)
    return list(Budget.objects.filter(scope, is_active=True).order_by("pk"))


def _refusal(budget: Budget, now: datetime) -> BudgetExceeded:
    _start, end = period_bounds(period=budget.period, at=now)
    when = f"until {end.isoformat()}" if end is not None else "for good (a total budget)"
    return BudgetExceeded(
        f'the budget "{budget.name}" is used up {when}', budget=budget.name, resets_at=end
    )


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    """What the check before a model call found, and what it holds for the call until recorded."""

    started_at: datetime
    """When the call may start: taken after the counters were read (and, reserving, locked)."""
    budgets: tuple[Budget, ...] = ()
    """Every active budget covering the call (block or warn): it is charged to them."""
    period_starts: tuple[datetime, ...] = ()
    """The period each of ``budgets`` counts the call in (the one it was checked in)."""
    reserved_tokens: int = 0
    """The tokens held in each of ``budgets``' counters until the call is recorded."""
    reserved_cost: Decimal = Decimal(0)
    """The cost held likewise (zero when the run's prices were not known)."""

    @property
    def budgets_apply(self) -> bool:
        """Whether any budget covered the call."""
        return bool(self.budgets)


def check_budgets(
    *,
    user_id: Any,
    profile_id: int | None,
    reserve: tuple[int, Decimal] | None = None,
) -> BudgetCheck:
    """Refuse a model call when a blocking budget covering it is used up; else what was found.

    Raises :class:`BudgetExceeded` naming the first exhausted budget. Posting
    a message, editing and regenerating call it before anything is stored
    (``reserve=None``: the counters are only read). The tool loop calls it
    before each model call with ``reserve``, the call's estimated
    ``(tokens, cost)``: in one statement, under the counters' row locks, the
    estimate is added to the counter of every budget covering the call and
    the blocking ones are checked as they were before it, so a concurrent
    check sees this call as spent while it runs. Recording the call replaces
    the estimate with what it used (:func:`charge_budgets`). A refused call
    reserves nothing.
    """
    covering = applicable_budgets(user_id=user_id, profile_id=profile_id)
    blocking = [budget for budget in covering if budget.action == Budget.Action.BLOCK]
    if not blocking:
        now = timezone.now()
        starts = tuple(period_bounds(period=b.period, at=now)[0] for b in covering)
        return BudgetCheck(now, tuple(covering), starts)
    moment = timezone.now()
    starts = tuple(period_bounds(period=b.period, at=moment)[0] for b in covering)
    if reserve is None:
        by_start = {b.pk: start for b, start in zip(covering, starts, strict=True)}
        spent = _read_counters([(budget.pk, by_start[budget.pk]) for budget in blocking])
        _refuse_exhausted(blocking, spent, moment)
        return BudgetCheck(timezone.now(), tuple(covering), starts)
    tokens, cost = reserve
    with transaction.atomic():
        # Every covering budget holds the reservation, so that recording the
        # call settles them all alike; only the blocking ones can refuse it.
        every = list(zip([b.pk for b in covering], starts, strict=True))
        after = _upsert_counters(every, (tokens, cost, 0), (tokens, cost))
        spent = {pk: (t - tokens, c - cost) for pk, (t, c) in after.items()}
        # Raised inside the block: the reservation is rolled back with it.
        _refuse_exhausted(blocking, spent, moment)
        return BudgetCheck(timezone.now(), tuple(covering), starts, tokens, cost)


def _read_counters(counters: Sequence[tuple[Any, datetime]]) -> dict[Any, tuple[int, Decimal]]:
    """The tokens and cost of each ``(budget id, period start)`` counter that exists (one query)."""
    match = Q(pk__in=[])
    for pk, start in counters:
        match |= Q(budget_id=pk, period_start=start)
    rows = BudgetCounter.objects.filter(match).values_list("budget_id", "tokens", "cost")
    return {pk: (tokens, cost) for pk, tokens, cost in rows}


def _refuse_exhausted(
    budgets: Sequence[Budget], spent: dict[Any, tuple[int, Decimal]], now: datetime
) -> None:
    for budget in budgets:  # in budget order: the first exhausted one is named
        tokens, cost = spent.get(budget.pk, (0, Decimal(0)))
        if budget.token_limit is not None and tokens >= budget.token_limit:
            raise _refusal(budget, now)
        if budget.cost_limit is not None and cost >= budget.cost_limit:
            raise _refusal(budget, now)


def charge_budgets(
    *,
    user_id: Any,
    profile_id: int | None,
    tokens: int,
    cost: Decimal | None,
    run: Run,
    budgets: BudgetCheck | None = None,
) -> None:
    """Add one recorded call to the counters of every budget covering it.

    ``budgets``: the check the call passed before it started
    (:func:`check_budgets`): the call counts in the periods it was checked
    in, and what the check reserved in them is replaced by ``tokens`` and
    ``cost``; else the budgets covering it now are read.
    Call inside the transaction that inserts the ``ModelCall``. A ``warn``
    budget that this call brings to its limit gets ``budget_warning`` sent
    once per period, after the transaction commits.
    """
    now = timezone.now()
    if budgets is None:
        covering = applicable_budgets(user_id=user_id, profile_id=profile_id)
        budgets = BudgetCheck(
            now, tuple(covering), tuple(period_bounds(period=b.period, at=now)[0] for b in covering)
        )
    if not budgets.budgets:
        return
    charge_counters(
        list(zip([b.pk for b in budgets.budgets], budgets.period_starts, strict=True)),
        tokens=tokens,
        cost=cost or Decimal(0),
        reserved_tokens=budgets.reserved_tokens,
        reserved_cost=budgets.reserved_cost,
    )
    for budget, start in zip(budgets.budgets, budgets.period_starts, strict=True):
        if budget.action != Budget.Action.WARN:
            continue
        reached = Q()
        if budget.token_limit is not None:
            reached |= Q(tokens__gte=budget.token_limit)
        if budget.cost_limit is not None:
            reached |= Q(cost__gte=budget.cost_limit)
        warned = BudgetCounter.objects.filter(
            reached, budget=budget, period_start=start, warned_at__isnull=True
        ).update(warned_at=now)
        if warned:
            transaction.on_commit(partial(_warn, budget, run, start))


def _warn(budget: Budget, run: Run, period_start: datetime) -> None:
    signals.budget_warning.send(sender=Budget, budget=budget, run=run, period_start=period_start)


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """How much of its current period a budget has used (the admin's usage page)."""

    budget: Budget
    """The budget."""
    period_start: datetime
    """Start of the current period."""
    resets_at: datetime | None
    """End of the current period (``None`` for ``total``)."""
    tokens: int
    """Tokens counted in the period (with the estimates of calls still in flight)."""
    cost: Decimal
    """Cost counted in the period (priced calls only; also with calls in flight)."""
    used_percent: int
    """The larger share of its limits used, in percent (may pass 100)."""


def budget_statuses(*, now: datetime) -> list[BudgetStatus]:
    """Every active budget with its current period's counters, in two queries."""
    budgets = list(Budget.objects.filter(is_active=True).select_related("user", "profile"))
    starts = {b.pk: period_bounds(period=b.period, at=now) for b in budgets}
    match = Q(pk__in=[])
    for pk, (start, _end) in starts.items():
        match |= Q(budget_id=pk, period_start=start)
    counters = {c.budget_id: c for c in BudgetCounter.objects.filter(match)}
    statuses = []
    for budget in budgets:
        start, end = starts[budget.pk]
        counter = counters.get(budget.pk)
        tokens = counter.tokens if counter else 0
        cost = counter.cost if counter else Decimal(0)
        shares = [0]
        if budget.token_limit:
            shares.append(tokens * 100 // budget.token_limit)
        if budget.cost_limit:
            shares.append(int(cost * 100 / budget.cost_limit))
        statuses.append(BudgetStatus(budget, start, end, tokens, cost, max(shares)))
    return statuses


def charge_counters(
    counters: Sequence[tuple[Any, datetime]],
    *,
    tokens: int,
    cost: Decimal,
    reserved_tokens: int = 0,
    reserved_cost: Decimal = Decimal(0),
) -> None:
    """Add one call (``tokens``, ``cost``) to each ``(budget id, period start)`` counter.

    ``reserved_tokens`` and ``reserved_cost``: what the call's check added to
    these counters, now replaced by what it used. A missing counter is
    created with the call as its first; concurrent charges of one counter
    add up (the upsert takes the row's lock). A budget deleted since its id
    was read is skipped.
    """
    _upsert_counters(
        counters,
        (tokens, cost, 1),
        (tokens - reserved_tokens, cost - reserved_cost),
    )


def _upsert_counters(
    counters: Sequence[tuple[Any, datetime]],
    first: tuple[int, Decimal, int],
    added: tuple[int, Decimal],
) -> dict[Any, tuple[int, Decimal]]:
    """Add to each ``(budget id, period start)`` counter; returns each one's tokens and cost after.

    One statement: a missing counter is created with ``first`` (tokens, cost,
    calls), an existing one gets ``added`` (tokens, cost) and ``first``'s
    calls; concurrent additions to one counter add up (the upsert takes the
    rows' locks in budget order, so two runs never deadlock), and never take
    it below zero; a budget deleted since its id was read is skipped. The sum is cast to ``NUMERIC``
    as the ORM casts a decimal sum on SQLite.
    """
    if not counters:
        return {}
    counter_table, budget_table = _sql.table(BudgetCounter), _sql.table(Budget)
    cast = "::timestamptz" if connection.vendor == "postgresql" else ""
    params: list[Any] = []
    for budget_id, period_start in counters:
        params += [
            _sql.pk(Budget, budget_id),
            connection.ops.adapt_datetimefield_value(period_start),
        ]
    rows = ", ".join([f"(%s, %s{cast})"] * len(counters))
    with connection.cursor() as cursor:
        # SQLite needs the WHERE to tell the SELECT's end from the upsert clause.
        cursor.execute(
            f"INSERT INTO {counter_table} (budget_id, period_start, tokens, cost, calls)"
            " SELECT v.column1, v.column2, %s, CAST(%s AS NUMERIC), %s"
            f" FROM (VALUES {rows}) AS v"
            f" WHERE EXISTS (SELECT 1 FROM {budget_table} b WHERE b.id = v.column1)"
            " ORDER BY v.column1"
            " ON CONFLICT (budget_id, period_start) DO UPDATE SET"
            f" tokens = {_at_least_zero(f'{counter_table}.tokens + %s')},"
            f" cost = CAST({_at_least_zero(f'{counter_table}.cost + CAST(%s AS NUMERIC)')}"
            " AS NUMERIC),"
            f" calls = {counter_table}.calls + excluded.calls"
            " RETURNING budget_id, tokens, cost",
            [*first, *params, added[0], added[0], added[1], added[1]],
        )
        returned = cursor.fetchall()
    return {pk: (spent, Decimal(str(money))) for pk, spent, money in returned}


def _at_least_zero(expression: str) -> str:
    """``expression``, or 0 when it is negative: a counter reset by hand while a call ran
    would otherwise go below zero when the call's reservation is replaced."""
    return f"CASE WHEN {expression} < 0 THEN 0 ELSE {expression} END"
