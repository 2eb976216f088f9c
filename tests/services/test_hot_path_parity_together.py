"""Statements that do two writes in one on PostgreSQL write the rows of the two ORM operations.

``charge_run(touch=True)`` also bumps the conversation; ``hold_for_results``
with the calls' states also writes them (on PostgreSQL in the same
statement, a data-modifying ``WITH``; on SQLite the caller writes them
after). Each is compared, through ``tests.services.hot_path_parity``, with
the ORM operations it stands for, and a run this process no longer holds
writes nothing at all: neither the bump nor a call's state.
"""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from conversations.domain import ChatMessage, ToolCall, Usage
from conversations.exceptions import RunFencedOut
from conversations.models import ToolCall as ToolCallRow
from conversations.services.loop import hot_path
from conversations.services.transcript.messages import append_messages

from .hot_path_parity import assert_same_rows
from .test_hot_path_parity import (
    FENCES,
    charge_run_orm,
    hold_for_results_orm,
    run,  # noqa: F401 (a fixture)
    stop_holding,
    touch_conversation_orm,
)
from .test_hot_path_parity_batches import update_call_states_orm

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls(run):  # noqa: F811 (the fixture imported above)
    """Three calls of the run's conversation, running, then finished each differently."""
    (message,) = append_messages(
        conversation=run.conversation,
        messages=[
            ChatMessage.assistant_tool_calls([ToolCall(id=f"c{n}", name="add") for n in range(3)])
        ],
        run=run,
    )
    started = timezone.now() - timedelta(seconds=2)
    ToolCallRow.objects.filter(message=message).update(
        status=ToolCallRow.Status.RUNNING, started_at=started
    )
    rows = list(ToolCallRow.objects.filter(message=message).order_by("index"))
    for row, status in zip(
        rows,
        [ToolCallRow.Status.SUCCEEDED, ToolCallRow.Status.FAILED, ToolCallRow.Status.TIMED_OUT],
        strict=True,
    ):
        row.status, row.finished_at = status, timezone.now()
    rows[1].error = "boom: 'a' \"é\"\nline 2"
    return rows


def store_states(run, rows) -> hot_path.Held:  # noqa: F811
    """What the loop does with a turn's results: the fence, then the states if not written."""
    held = hot_path.hold_for_results(run, rows)
    if not held.states_stored:
        hot_path.update_call_states(rows)
    return held


def test_charge_run_that_touches_writes_the_counters_and_the_bump_the_orm_does(run):  # noqa: F811
    mine = copy.deepcopy(run)

    def by_orm() -> bool:
        theirs = copy.deepcopy(run)
        flag = charge_run_orm(theirs, Usage(10, 5), rounds=1, cost=None, now=mine.heartbeat_at)
        touch_conversation_orm(run.conversation_id, mine.heartbeat_at)
        return flag

    returned = assert_same_rows(
        lambda: hot_path.charge_run(mine, Usage(10, 5), rounds=1, cost=None, touch=True),
        by_orm,
        writes=True,
    )
    assert returned is False
    assert mine.conversation.updated_at == mine.heartbeat_at


@pytest.mark.parametrize("how", FENCES)
def test_charge_run_that_touches_a_run_no_longer_held_bumps_nothing(run, how):  # noqa: F811
    stop_holding(run, how)
    mine = copy.deepcopy(run)
    before = mine.conversation.updated_at
    outcome = assert_same_rows(
        lambda: hot_path.charge_run(mine, Usage(10, 5), rounds=1, cost=None, touch=True),
        lambda: charge_run_orm(
            copy.deepcopy(run), Usage(10, 5), rounds=1, cost=None, now=timezone.now()
        ),
        writes=False,
    )
    assert outcome is RunFencedOut
    assert mine.conversation.updated_at == before


def test_hold_for_results_with_the_states_writes_what_the_orm_does(run, calls):  # noqa: F811
    mine, stored = copy.deepcopy(run), []

    def by_hand() -> tuple[bool, bool]:
        held = store_states(mine, copy.deepcopy(calls))
        stored.append(held.states_stored)
        return held.cancel_requested, held.budgets_apply

    def by_orm() -> tuple[bool, bool]:
        held = hold_for_results_orm(copy.deepcopy(run), now=mine.conversation.updated_at)
        update_call_states_orm(copy.deepcopy(calls))
        return held.cancel_requested, held.budgets_apply

    assert assert_same_rows(by_hand, by_orm, writes=True) == (False, False)
    assert stored == [connection.vendor == "postgresql"]


@pytest.mark.parametrize("how", FENCES)
def test_hold_for_results_of_a_run_no_longer_held_writes_no_call_state(run, calls, how):  # noqa: F811
    stop_holding(run, how)
    mine = copy.deepcopy(run)
    outcome = assert_same_rows(
        lambda: hot_path.hold_for_results(mine, copy.deepcopy(calls)),
        lambda: hold_for_results_orm(copy.deepcopy(run), now=timezone.now()),
        writes=False,
    )
    assert outcome is RunFencedOut
