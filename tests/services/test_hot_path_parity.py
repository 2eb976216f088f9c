"""The run's and the conversation's hand-written statements write the rows the ORM would.

The rows are set up once; the statement runs in one savepoint and the ORM
operation it stands for in another (see ``tests.services.hot_path_parity``),
and the rows each leaves must be equal column by column, as must what the two
return or raise. The ORM equivalents below are the specification: the
readable operation each statement replaces.

Timestamps are compared exactly, never with a tolerance: no statement reads
the database's clock. Each takes ``timezone.now()`` once and leaves that
instant on the object it mirrors in memory (``run.heartbeat_at``,
``run.conversation.updated_at``), and the ORM side is handed the same one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from datetime import timezone as fixed_offset
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from conversations.conf import app_settings
from conversations.domain import Usage
from conversations.exceptions import RunFencedOut
from conversations.models import (
    Budget,
    Conversation,
    LanguageModel,
    Profile,
    Run,
    ToolSetting,
)
from conversations.selectors import tool_settings
from conversations.services.loop import hot_path
from conversations.services.loop.fencing import fenced
from conversations.services.transcript.messages import touch_conversation
from conversations.services.usage.budgets import applicable_budgets
from conversations.services.usage.prices import PRICE_FIELDS, Prices

from .hot_path_parity import assert_same_rows

pytestmark = pytest.mark.django_db

# The ORM equivalents: what each statement stands for.


def held(run: Run) -> QuerySet[Run]:
    """The run's row while this process holds it; a run it never claimed it does not hold."""
    # ``claimed_at=None`` would filter IS NULL, matching a queued run, where
    # the statement's ``claimed_at = NULL`` matches nothing.
    return Run.objects.none() if run.claimed_at is None else fenced(run)


def budgets_apply(run: Run) -> bool:
    """Whether any active budget (block or warn) covers the run's next model call."""
    return bool(applicable_budgets(user_id=run.conversation.owner_id, profile_id=run.profile_id))


def prices_of(run: Run) -> Prices:
    """The prices of the run's language model (all unknown without a profile)."""
    if run.profile is None:
        return Prices(currency=app_settings().CURRENCY)
    values = LanguageModel.objects.values(*PRICE_FIELDS).get(pk=run.profile.language_model_id)
    return Prices.from_fields(values, currency=app_settings().CURRENCY)


def open_turn_orm(run: Run, *, now: datetime) -> hot_path.Opened:
    """Bump the conversation; read the budgets, the tool settings and the model's prices."""
    if not Conversation.objects.filter(pk=run.conversation_id).update(updated_at=now):
        raise Conversation.DoesNotExist("the conversation does not exist")
    return hot_path.Opened(budgets_apply(run), tool_settings(), prices_of(run))


def hold_for_results_orm(run: Run, *, now: datetime) -> hot_path.Held:
    """Fence the run, bump its conversation; read ``cancel_requested`` and the budgets."""
    if connection.vendor == "postgresql":
        holds = held(run).update(heartbeat_at=now) == 1
    else:
        # SQLite serialises writers: the fence is only checked, and the
        # heartbeat is left to the heartbeat thread (as the statement does).
        holds = held(run).exists()
    if not holds:
        raise RunFencedOut(f"run {run.pk} is no longer held by this process")
    Conversation.objects.filter(pk=run.conversation_id).update(updated_at=now)
    cancel_requested = Run.objects.values_list("cancel_requested", flat=True).get(pk=run.pk)
    return hot_path.Held(cancel_requested, budgets_apply(run))


def charge_run_orm(
    run: Run, usage: Usage, *, rounds: int, cost: Decimal | None, now: datetime
) -> bool:
    """Add a model call to the run's counters and refresh its heartbeat, fenced; return the
    run's ``cancel_requested``."""
    changes: dict[str, Any] = {
        "iterations": F("iterations") + rounds,
        "prompt_tokens": F("prompt_tokens") + usage.prompt_tokens,
        "completion_tokens": F("completion_tokens") + usage.completion_tokens,
        "total_tokens": F("total_tokens") + usage.total_tokens,
        "cached_prompt_tokens": F("cached_prompt_tokens") + usage.cached_prompt_tokens,
        "reasoning_tokens": F("reasoning_tokens") + usage.reasoning_tokens,
        "heartbeat_at": now,
    }
    if cost is None:
        changes["unpriced_calls"] = F("unpriced_calls") + 1
    else:
        changes["cost"] = Coalesce(F("cost"), Value(Decimal(0))) + cost
    if not held(run).update(**changes):
        raise RunFencedOut(f"run {run.pk} is no longer held by this process")
    return Run.objects.values_list("cancel_requested", flat=True).get(pk=run.pk)


def touch_conversation_orm(conversation_id: Any, now: datetime) -> None:
    """Set the conversation's ``updated_at``."""
    if not Conversation.objects.filter(pk=conversation_id).update(updated_at=now):
        raise Conversation.DoesNotExist("the conversation does not exist")


# The rows.

CLAIMED_BY = "host:1"


@pytest.fixture
def run(demo_conversation, profile):
    """A running run of ``demo_conversation`` on ``profile``, claimed by this process."""
    claimed = timezone.now() - timedelta(seconds=30)
    return Run.objects.create(
        conversation=demo_conversation,
        profile=profile,
        max_iterations=10,
        claimed_at=claimed,
        heartbeat_at=claimed,
        worker=CLAIMED_BY,
    )


@pytest.fixture
def other_profile(language_model):
    return Profile.objects.create(slug="other", name="Other", language_model=language_model)


def stop_holding(run: Run, how: str) -> None:
    """Make ``run`` one this process no longer holds (``how``: one of :data:`FENCES`)."""
    rows = Run.objects.filter(pk=run.pk)
    if how == "ended by recovery":
        rows.update(status=Run.Status.INTERRUPTED, finished_at=timezone.now())
    elif how == "waiting for an approval":
        rows.update(status=Run.Status.AWAITING_APPROVAL)
    elif how == "claimed again by another process":
        rows.update(claimed_at=run.claimed_at + timedelta(minutes=1), worker="host:2")
    elif how == "claimed again a microsecond later":
        rows.update(claimed_at=run.claimed_at + timedelta(microseconds=1))
    elif how == "never claimed":
        rows.update(claimed_at=None, worker="")
        run.claimed_at, run.worker = None, ""
    elif how == "deleted with its conversation":
        run.conversation.delete()
    else:
        raise AssertionError(how)


FENCES = (
    "ended by recovery",
    "waiting for an approval",
    "claimed again by another process",
    "claimed again a microsecond later",
    "never claimed",
    "deleted with its conversation",
)

BUDGETS: dict[str, Callable[..., dict[str, Any]]] = {
    "everyone's": lambda **_: {"scope": Budget.Scope.GLOBAL},
    "everyone's, inactive": lambda **_: {"scope": Budget.Scope.GLOBAL, "is_active": False},
    "everyone's, warning": lambda **_: {"scope": Budget.Scope.GLOBAL, "action": "warn"},
    "the owner's": lambda owner, **_: {"scope": Budget.Scope.USER, "user": owner},
    "another user's": lambda other_user, **_: {"scope": Budget.Scope.USER, "user": other_user},
    "the profile's": lambda profile, **_: {"scope": Budget.Scope.PROFILE, "profile": profile},
    "another profile's": lambda other_profile, **_: {
        "scope": Budget.Scope.PROFILE,
        "profile": other_profile,
    },
}
"""Budgets by whom they cover; the run's owner and profile decide which apply."""


@pytest.fixture
def add_budget(user, other_user, profile, other_profile):
    """``add_budget(kind)``: a budget of one of the :data:`BUDGETS` kinds (``None``: none)."""
    targets = {
        "owner": user,
        "other_user": other_user,
        "profile": profile,
        "other_profile": other_profile,
    }

    def add(kind: str | None) -> None:
        if kind is not None:
            scope = BUDGETS[kind](**targets)
            Budget.objects.create(name=kind, period=Budget.Period.DAY, token_limit=1000, **scope)

    return add


# open_turn


def assert_open_turn_parity(run: Run) -> object:
    """Open a turn both ways on copies of ``run``, the ORM at the statement's instant."""
    mine = copy.deepcopy(run)
    return assert_same_rows(
        lambda: hot_path.open_turn(mine),
        lambda: open_turn_orm(copy.deepcopy(run), now=mine.conversation.updated_at),
        writes=True,
    )


@pytest.mark.parametrize("with_profile", [True, False], ids=["with a profile", "without"])
@pytest.mark.parametrize("kind", [None, *BUDGETS], ids=["no budget", *BUDGETS])
def test_open_turn_bumps_the_conversation_and_reads_the_budgets_as_the_orm_does(
    run, add_budget, kind, with_profile
):
    add_budget(kind)
    if not with_profile:
        Run.objects.filter(pk=run.pk).update(profile=None)
        run.profile = None
    assert_open_turn_parity(run)


TOOL_SETTINGS = {
    "none": [],
    "one disabled": [{"name": "search", "enabled": False}],
    "one enabled, deferring": [{"name": "search"}],
    "approvals": [{"name": "search", "approval": "always"}, {"name": "rm", "approval": "staff"}],
    "disabled and approved": [{"name": "rm", "enabled": False, "approval": "never"}],
    "names to escape": [{"name": 'says "hé" \\ 🙂', "enabled": False}],
}


@pytest.mark.parametrize("rows", TOOL_SETTINGS.values(), ids=TOOL_SETTINGS)
def test_open_turn_reads_the_tool_settings_as_the_orm_does(run, rows):
    for fields in rows:
        ToolSetting.objects.create(**fields)
    assert_open_turn_parity(run)


PRICES = {
    "none known": {},
    "all known": {
        "input_price_per_million": Decimal("2.5"),
        "cached_input_price_per_million": Decimal("1.25"),
        "output_price_per_million": Decimal("10"),
        "reasoning_price_per_million": Decimal("0.000001"),
    },
    "some known": {"input_price_per_million": Decimal("123456.123456")},
}


@pytest.mark.parametrize("prices", PRICES.values(), ids=PRICES)
def test_open_turn_reads_the_prices_as_the_orm_does(run, language_model, prices):
    LanguageModel.objects.filter(pk=language_model.pk).update(**prices)
    opened = assert_open_turn_parity(run)
    # Equal decimals may differ in places (2.5 == 2.500000): read as the ORM spells them.
    assert isinstance(opened, hot_path.Opened)
    assert repr(opened.prices) == repr(prices_of(run))


def test_open_turn_of_a_deleted_conversation_writes_nothing(run):
    run.conversation.delete()
    mine = copy.deepcopy(run)
    outcome = assert_same_rows(
        lambda: hot_path.open_turn(mine),
        lambda: open_turn_orm(copy.deepcopy(run), now=timezone.now()),
        writes=False,
    )
    assert outcome is Conversation.DoesNotExist


# hold_for_results


@pytest.mark.parametrize("cancel_requested", [False, True], ids=["running on", "cancel asked"])
@pytest.mark.parametrize("kind", [None, *BUDGETS], ids=["no budget", *BUDGETS])
def test_hold_for_results_writes_and_reads_what_the_orm_does(
    run, add_budget, kind, cancel_requested
):
    add_budget(kind)
    Run.objects.filter(pk=run.pk).update(cancel_requested=cancel_requested)
    mine = copy.deepcopy(run)
    outcome = assert_same_rows(
        lambda: hot_path.hold_for_results(mine),
        lambda: hold_for_results_orm(copy.deepcopy(run), now=mine.conversation.updated_at),
        writes=True,
    )
    assert outcome == hot_path.Held(cancel_requested, budgets_apply(run))


@pytest.mark.parametrize("how", FENCES)
def test_hold_for_results_of_a_run_no_longer_held_writes_nothing(run, how):
    stop_holding(run, how)
    mine = copy.deepcopy(run)
    outcome = assert_same_rows(
        lambda: hot_path.hold_for_results(mine),
        lambda: hold_for_results_orm(copy.deepcopy(run), now=timezone.now()),
        writes=False,
    )
    assert outcome is RunFencedOut


# charge_run

CALLS = {
    "an unpriced call": [(Usage(10, 5), 1, None)],
    "a priced call": [
        (Usage(1000, 200, cached_prompt_tokens=400, reasoning_tokens=50), 1, Decimal("0.003125"))
    ],
    "a free call that is no round": [(Usage(), 0, Decimal(0))],
    "a cost finer than the column keeps": [(Usage(1, 1), 1, Decimal("0.0000000015"))],
    "a cost of 18 digits": [(Usage(1, 1), 1, Decimal("123456789.123456789"))],
    "costs quantized as priced, adding up to a whole": [
        (Usage(1, 1), 1, Decimal("0E-9")),
        (Usage(1, 1), 1, Decimal("0.500000000")),
        (Usage(1, 1), 1, Decimal("0.500000000")),
    ],
    "several calls, priced and not": [
        (Usage(10, 5), 1, None),
        (Usage(20, 7, total_tokens=30), 0, Decimal("0.25")),
        (Usage(3, 1), 1, None),
        (Usage(4, 2, reasoning_tokens=2), 1, Decimal("1.000000001")),
    ],
}


@pytest.mark.parametrize("cost", [None, Decimal("1.5")], ids=["cost unknown so far", "priced"])
@pytest.mark.parametrize("calls", CALLS.values(), ids=CALLS)
def test_charge_run_writes_the_counters_the_orm_does(run, calls, cost):
    Run.objects.filter(pk=run.pk).update(
        cost=cost, unpriced_calls=2, iterations=1, prompt_tokens=7, total_tokens=7
    )
    run.refresh_from_db()
    mine, instants = copy.deepcopy(run), []

    def by_hand() -> None:
        for usage, rounds, price in calls:
            hot_path.charge_run(mine, usage, rounds=rounds, cost=price)
            instants.append(mine.heartbeat_at)

    def by_orm() -> None:
        theirs = copy.deepcopy(run)
        for (usage, rounds, price), now in zip(calls, instants, strict=True):
            charge_run_orm(theirs, usage, rounds=rounds, cost=price, now=now)

    assert_same_rows(by_hand, by_orm, writes=True)


@pytest.mark.parametrize("flagged", [False, True], ids=["not cancelled", "cancel requested"])
def test_charge_run_returns_the_cancel_flag_the_orm_reads(run, flagged):
    Run.objects.filter(pk=run.pk).update(cancel_requested=flagged)
    mine = copy.deepcopy(run)
    returned = assert_same_rows(
        lambda: hot_path.charge_run(mine, Usage(10, 5), rounds=1, cost=None),
        lambda: charge_run_orm(
            copy.deepcopy(run), Usage(10, 5), rounds=1, cost=None, now=mine.heartbeat_at
        ),
        writes=True,
    )
    assert returned is flagged


def test_a_run_claimed_on_a_whole_second_is_held_by_both(run):
    # SQLite compares the claim as text, and a whole second is spelled without a fraction.
    claimed = run.claimed_at.replace(microsecond=0)
    Run.objects.filter(pk=run.pk).update(claimed_at=claimed)
    run.claimed_at = claimed
    mine = copy.deepcopy(run)
    assert_same_rows(
        lambda: hot_path.charge_run(mine, Usage(10, 5), rounds=1, cost=None),
        lambda: charge_run_orm(
            copy.deepcopy(run), Usage(10, 5), rounds=1, cost=None, now=mine.heartbeat_at
        ),
        writes=True,
    )
    mine = copy.deepcopy(run)
    assert_same_rows(
        lambda: hot_path.hold_for_results(mine),
        lambda: hold_for_results_orm(copy.deepcopy(run), now=mine.conversation.updated_at),
        writes=True,
    )


@pytest.mark.parametrize("how", FENCES)
def test_charge_run_of_a_run_no_longer_held_writes_nothing(run, how):
    stop_holding(run, how)
    mine = copy.deepcopy(run)
    outcome = assert_same_rows(
        lambda: hot_path.charge_run(mine, Usage(10, 5), rounds=1, cost=Decimal("0.5")),
        lambda: charge_run_orm(
            copy.deepcopy(run), Usage(10, 5), rounds=1, cost=Decimal("0.5"), now=timezone.now()
        ),
        writes=False,
    )
    assert outcome is RunFencedOut


# touch_conversation

INSTANTS = {
    "with microseconds": datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=UTC),
    "on a whole second": datetime(2026, 12, 1, 9, 30, 15, tzinfo=UTC),
    "in another time zone": datetime(
        2026, 12, 1, 2, 0, 1, 5, tzinfo=fixed_offset(-timedelta(hours=7))
    ),
}


@pytest.mark.parametrize("now", INSTANTS.values(), ids=INSTANTS)
def test_touch_conversation_writes_what_the_orm_does(conversation, now):
    assert_same_rows(
        lambda: touch_conversation(conversation.pk, now),
        lambda: touch_conversation_orm(conversation.pk, now),
        writes=True,
    )


def test_touch_conversation_of_a_deleted_conversation_writes_nothing(conversation):
    pk = conversation.pk
    conversation.delete()
    outcome = assert_same_rows(
        lambda: touch_conversation(pk, timezone.now()),
        lambda: touch_conversation_orm(pk, timezone.now()),
        writes=False,
    )
    assert outcome is Conversation.DoesNotExist
