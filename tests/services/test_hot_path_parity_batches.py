"""The batch statements (call states, budget counters) write the rows the ORM would.

The rows are set up once; the statement runs in one savepoint and the ORM
operation it stands for in another (see ``tests.services.hot_path_parity``),
and the rows each leaves must be equal column by column, as must what the two
return or raise. The ORM equivalents below are the specification: the
readable operation each statement replaces.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import timezone as fixed_offset
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from conversations.domain import ChatMessage, ToolCall
from conversations.models import Budget, BudgetCounter
from conversations.models import ToolCall as ToolCallRow
from conversations.services.loop import hot_path
from conversations.services.transcript.messages import append_messages
from conversations.services.usage.budgets import charge_counters

from .hot_path_parity import assert_same_rows

pytestmark = pytest.mark.django_db

# The ORM equivalents: what each statement stands for.


def update_call_states_orm(rows: Sequence[ToolCallRow]) -> None:
    """Write each call's status, error and times."""
    ToolCallRow.objects.bulk_update(rows, ["status", "error", "started_at", "finished_at"])


def charge_counters_orm(
    counters: Sequence[tuple[Any, datetime]], *, tokens: int, cost: Decimal
) -> None:
    """Add one call to each budget's counter of a period, created first when missing."""
    ids = [budget_id for budget_id, _start in counters]
    existing = set(Budget.objects.filter(pk__in=ids).values_list("pk", flat=True))
    for budget_id, period_start in counters:
        if budget_id not in existing:
            continue  # deleted since its id was read: there is nothing left to charge
        counter, _created = BudgetCounter.objects.get_or_create(
            budget_id=budget_id, period_start=period_start
        )
        BudgetCounter.objects.filter(pk=counter.pk).update(
            tokens=F("tokens") + tokens, cost=F("cost") + cost, calls=F("calls") + 1
        )


# update_call_states


def finish(row: ToolCallRow, status: str, *, started: datetime | None, error: str = "") -> None:
    row.status, row.error, row.started_at = status, error, started
    row.finished_at = timezone.now() if started is None else started + timedelta(seconds=2)


def no_call(rows: list[ToolCallRow], now: datetime) -> list[ToolCallRow]:
    return []


def one_succeeded(rows: list[ToolCallRow], now: datetime) -> list[ToolCallRow]:
    finish(rows[0], ToolCallRow.Status.SUCCEEDED, started=now)
    return rows[:1]


def each_differently(rows: list[ToolCallRow], now: datetime) -> list[ToolCallRow]:
    finish(rows[0], ToolCallRow.Status.SUCCEEDED, started=now)
    finish(rows[1], ToolCallRow.Status.FAILED, started=now, error="boom: 'a' \"é\" 🙂\nline 2")
    finish(rows[2], ToolCallRow.Status.REJECTED, started=None)
    return rows


def in_another_zone(rows: list[ToolCallRow], now: datetime) -> list[ToolCallRow]:
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=fixed_offset(timedelta(hours=5, minutes=30)))
    for row in rows:
        finish(row, ToolCallRow.Status.TIMED_OUT, started=started)
    return rows


@pytest.mark.parametrize(
    "change",
    [no_call, one_succeeded, each_differently, in_another_zone],
    ids=["no call", "one succeeded", "each differently", "on a whole second in another zone"],
)
def test_update_call_states_writes_what_bulk_update_does(conversation, change):
    (message,) = append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.assistant_tool_calls([ToolCall(id=f"c{n}", name="add") for n in range(3)])
        ],
    )
    ToolCallRow.objects.filter(message=message).update(
        status=ToolCallRow.Status.RUNNING, started_at=timezone.now()
    )
    rows = change(
        list(ToolCallRow.objects.filter(message=message).order_by("index")), timezone.now()
    )
    assert_same_rows(
        lambda: hot_path.update_call_states(copy.deepcopy(rows)),
        lambda: update_call_states_orm(copy.deepcopy(rows)),
        writes=bool(rows),
    )


# charge_counters

STARTS = (
    datetime(2026, 12, 1, tzinfo=UTC),
    datetime(2026, 11, 30, tzinfo=UTC),
    datetime(2000, 1, 1, tzinfo=UTC),
)
"""The current period's start of each of the three budgets (a day, a week, a total)."""

INDIA = fixed_offset(timedelta(hours=5, minutes=30))


@pytest.fixture
def budgets():
    periods = (Budget.Period.DAY, Budget.Period.WEEK, Budget.Period.TOTAL)
    return [
        Budget.objects.create(
            name=period, scope=Budget.Scope.GLOBAL, period=period, cost_limit=Decimal(10)
        )
        for period in periods
    ]


@dataclass(frozen=True)
class Charges:
    """Calls charged to the three budgets, and the counters there are before."""

    calls: tuple[tuple[int, Decimal], ...]
    """Tokens and cost of each call."""
    existing: tuple[int, ...] = ()
    """The budgets (by index) whose counter of the current period exists, warned once."""
    earlier: bool = False
    """Whether every budget has a counter of an earlier period."""
    deleted: tuple[int, ...] = ()
    """The budgets deleted after their ids were read."""
    zone: Any = UTC
    """The time zone in which the second and later calls give the period starts."""


CALL = (120, Decimal("0.0042"))

CHARGES = {
    "the first call of a period creates the counters": Charges((CALL,)),
    "existing counters add up": Charges((CALL,), existing=(0, 1, 2)),
    "one counter exists, two are created": Charges((CALL,), existing=(1,)),
    "an earlier period's counters are left alone": Charges((CALL,), earlier=True),
    "a budget deleted meanwhile is skipped": Charges((CALL,), existing=(0,), deleted=(1,)),
    "a free call": Charges(((0, Decimal(0)),)),
    "a cost finer than the column keeps": Charges(
        ((1, Decimal("0.0000000015")),) * 2, existing=(0,)
    ),
    "costs quantized as priced, adding up to a whole": Charges(
        ((1, Decimal("0E-9")), (1, Decimal("0.250000000")), (1, Decimal("0.250000000"))),
        existing=(0,),
    ),
    "several calls": Charges((CALL, (0, Decimal(0)), (7, Decimal("1.5"))), existing=(2,)),
    "period starts in another zone": Charges((CALL, CALL, CALL), existing=(0,), zone=INDIA),
}


@pytest.mark.parametrize("charges", CHARGES.values(), ids=CHARGES)
def test_charge_counters_writes_what_the_orm_does(budgets, charges):
    for index in charges.existing:
        BudgetCounter.objects.create(
            budget=budgets[index],
            period_start=STARTS[index],
            tokens=100,
            cost=Decimal("0.5"),
            calls=2,
            warned_at=STARTS[index] + timedelta(hours=1, microseconds=7),
        )
    if charges.earlier:
        for budget, start in zip(budgets, STARTS, strict=True):
            BudgetCounter.objects.create(budget=budget, period_start=start - timedelta(days=31))
    ids = [budget.pk for budget in budgets]
    Budget.objects.filter(pk__in=[ids[index] for index in charges.deleted]).delete()

    def charge(apply: Callable[..., None]) -> None:
        for number, (tokens, cost) in enumerate(charges.calls):
            zone = UTC if number == 0 else charges.zone
            starts = [start.astimezone(zone) for start in STARTS]
            apply(list(zip(ids, starts, strict=True)), tokens=tokens, cost=cost)

    assert_same_rows(
        lambda: charge(charge_counters),
        lambda: charge(charge_counters_orm),
        writes=True,
    )


@pytest.mark.parametrize("deleted", [False, True], ids=["no counter", "every budget deleted"])
def test_charge_counters_of_nothing_left_to_charge_writes_nothing(budgets, deleted):
    counters = [(budget.pk, start) for budget, start in zip(budgets, STARTS, strict=True)]
    if deleted:
        Budget.objects.all().delete()
    else:
        counters = []
    assert_same_rows(
        lambda: charge_counters(counters, tokens=5, cost=Decimal(1)),
        lambda: charge_counters_orm(counters, tokens=5, cost=Decimal(1)),
        writes=False,
    )
