"""Budgets: check them before every model call, charge them with every recorded call.

Each budget has one counter row per period. :func:`check_budgets` locks the
counters of the budgets that apply to a run (``SELECT ... FOR UPDATE``, in
budget order so two runs never deadlock) and refuses the call when a blocking
one has reached its limit; the call's ``started_at`` is taken while the locks
are held. :func:`charge_budgets` adds a recorded call to the same counters in
the transaction that inserts its ``ModelCall`` row. Concurrent runs therefore
see each other's spending as soon as it is recorded, and the overspend is
bounded by the calls that were already in flight when the limit was reached.

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
from conversations.models import Budget, BudgetCounter, Profile, Run

from .. import _sql

__all__ = [
    "BudgetStatus",
    "applicable_budgets",
    "budget_check",
    "budget_statuses",
    "charge_budgets",
    "check_budgets",
    "ensure_within_budgets",
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


def _exhausted(budget: Budget, counter: BudgetCounter) -> bool:
    if budget.token_limit is not None and counter.tokens >= budget.token_limit:
        return True
    return budget.cost_limit is not None and counter.cost >= budget.cost_limit


def _refusal(budget: Budget, now: datetime) -> BudgetExceeded:
    _start, end = period_bounds(period=budget.period, at=now)
    when = f"until {end.isoformat()}" if end is not None else "for good (a total budget)"
    return BudgetExceeded(
        f'the budget "{budget.name}" is used up {when}', budget=budget.name, resets_at=end
    )


def _locked_counters(budgets: list[Budget], now: datetime) -> list[BudgetCounter]:
    """The current period's counter of each budget, locked, in budget order.

    Counters are created (and then read again) only when one is missing: the
    first call of a period.
    """
    starts = {budget.pk: period_bounds(period=budget.period, at=now)[0] for budget in budgets}
    match = Q()
    for pk, start in starts.items():
        match |= Q(budget_id=pk, period_start=start)
    counters = BudgetCounter.objects.filter(match).order_by("budget_id").select_for_update()
    found = list(counters)
    if len(found) == len(starts):
        return found
    BudgetCounter.objects.bulk_create(
        [BudgetCounter(budget_id=pk, period_start=start) for pk, start in starts.items()],
        ignore_conflicts=True,
    )
    return list(counters.all())


def check_budgets(*, run: Run, now: datetime | None = None) -> datetime:
    """Refuse the run's next model call if a blocking budget is used up; else its start time.

    Raises :class:`BudgetExceeded` naming the first exhausted budget. The
    returned instant is taken while the counters are locked: a call recorded
    before it was seen by this check.
    """
    return budget_check(run=run, now=now)[0]


def budget_check(*, run: Run, now: datetime | None = None) -> tuple[datetime, list[Budget]]:
    """:func:`check_budgets`, and the budgets (block or warn) that cover the run.

    The call is charged to those budgets when it is recorded (see
    :func:`charge_budgets`). The tool loop skips reading budgets for a call
    when none covered the previous one and none has been added since (see
    ``hot_path``).
    """
    covering = applicable_budgets(user_id=run.conversation.owner_id, profile_id=run.profile_id)
    budgets = [budget for budget in covering if budget.action == Budget.Action.BLOCK]
    if not budgets:
        return timezone.now(), covering
    with transaction.atomic():
        moment = now or timezone.now()
        by_pk = {budget.pk: budget for budget in budgets}
        for counter in _locked_counters(budgets, moment):
            budget = by_pk[counter.budget_id]
            if _exhausted(budget, counter):
                raise _refusal(budget, moment)
        return timezone.now(), covering


def ensure_within_budgets(*, user: Any, profile: Profile | None) -> None:
    """Raise :class:`BudgetExceeded` when a blocking budget covering ``user``/``profile`` is used up.

    Read without locks: it answers a request early; the loop's own check
    before each call is the one that holds.
    """
    now = timezone.now()
    budgets = applicable_budgets(user_id=user.pk, profile_id=profile.pk if profile else None)
    for budget in budgets:
        if budget.action != Budget.Action.BLOCK:
            continue
        start, _end = period_bounds(period=budget.period, at=now)
        counter = BudgetCounter.objects.filter(budget=budget, period_start=start).first()
        if counter is not None and _exhausted(budget, counter):
            raise _refusal(budget, now)


def charge_budgets(
    *,
    user_id: Any,
    profile_id: int | None,
    tokens: int,
    cost: Decimal | None,
    run: Run,
    budgets: Sequence[Budget] | None = None,
) -> None:
    """Add one recorded call to the counters of every budget covering it.

    ``budgets``: the ones the call was checked against before it started
    (:func:`budget_check`); else those covering it now are read. Call inside
    the transaction that inserts the ``ModelCall``. A ``warn`` budget that this
    call brings to its limit gets ``budget_warning`` sent once per period,
    after the transaction commits.
    """
    if budgets is None:
        budgets = applicable_budgets(user_id=user_id, profile_id=profile_id)
    if not budgets:
        return
    now = timezone.now()
    charge_counters(
        [(budget.pk, period_bounds(period=budget.period, at=now)[0]) for budget in budgets],
        tokens=tokens,
        cost=cost or Decimal(0),
    )
    for budget in budgets:
        if budget.action != Budget.Action.WARN:
            continue
        reached = Q()
        if budget.token_limit is not None:
            reached |= Q(tokens__gte=budget.token_limit)
        if budget.cost_limit is not None:
            reached |= Q(cost__gte=budget.cost_limit)
        start, _end = period_bounds(period=budget.period, at=now)
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
    """Tokens counted in the period."""
    cost: Decimal
    """Cost counted in the period (priced calls only)."""
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
    counters: Sequence[tuple[Any, datetime]], *, tokens: int, cost: Decimal
) -> None:
    """Add one call (``tokens``, ``cost``) to each ``(budget id, period start)`` counter.

    A missing counter is created with the call as its first; concurrent
    charges of one counter add up (the upsert takes the row's lock). A budget
    deleted since its id was read is skipped. The sum is cast to ``NUMERIC``
    as the ORM casts a decimal sum on SQLite.
    """
    if not counters:
        return
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
            " SELECT v.column1, v.column2, %s, CAST(%s AS NUMERIC), 1"
            f" FROM (VALUES {rows}) AS v"
            f" WHERE EXISTS (SELECT 1 FROM {budget_table} b WHERE b.id = v.column1)"
            " ON CONFLICT (budget_id, period_start) DO UPDATE SET"
            f" tokens = {counter_table}.tokens + excluded.tokens,"
            f" cost = CAST({counter_table}.cost + excluded.cost AS NUMERIC),"
            f" calls = {counter_table}.calls + 1",
            [tokens, cost, *params],
        )
