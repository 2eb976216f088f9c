"""What a turn of the tool loop costs the database: statements and commits, whatever k.

Counted on the loop's connection through ``connection.execute_wrapper``:

- a *statement* is anything Django sends through the cursor except
  transaction control (``BEGIN``, ``COMMIT``, ``ROLLBACK``: SQLite's
  ``BEGIN IMMEDIATE`` passes through the cursor, PostgreSQL's ``BEGIN`` does
  not, so leaving them out makes the two databases comparable).
  ``SAVEPOINT`` and ``RELEASE SAVEPOINT`` do count: they are round trips too;
- a *commit* is a committed transaction that wrote: a write outside
  ``atomic`` (autocommit), or an outermost ``atomic`` block that wrote,
  counted by an ``on_commit`` hook (so a rolled-back block counts none).

The tests run with real transactions (``transaction=True``): inside the
test's own transaction every ``atomic`` would become a savepoint, which is
not what production pays. The workload is ``bench/loop_overhead.py``'s: a
model asking for k calls of a trivial tool in each of 5 rounds, then answering
with text; no profile, no budget. A round is everything between one model
call and the next; the start is everything before the first model call, the
finish everything after the last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, transaction

from conversations.models import Budget, BudgetCounter, Message, ModelCall, Run, ToolCall
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import create_conversation, run_tool_loop
from conversations.services.loop import runs
from conversations.tools import registry, tool

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 5
ROUND_STATEMENTS = 6 if connection.vendor == "postgresql" else 8
"""On PostgreSQL the run's counters and the conversation's bump are one statement, and so are
the fence and the calls' states (data-modifying ``WITH``); SQLite has no such statement."""
ROUND_COMMITS = 2
START_STATEMENTS = 8
START_COMMITS = 1
"""The default profile, the user's running runs counted (on PostgreSQL after a per-user
advisory lock), the run inserted claimed, the conversation bumped (budgets and tool settings
read back), the history, the user message, the MCP tools (docs/adr/0013-lean-round.md)."""
FINISH_STATEMENTS = 6
BUDGETED_ROUND_STATEMENTS = ROUND_STATEMENTS + 3
"""With a blocking budget: the budgets read and the call's estimate reserved in their counters
(one upsert under the counters' locks) before the model call, then the reservation replaced by
what the call used (one upsert) with the call's ledger row."""
BUDGETED_ROUND_COMMITS = ROUND_COMMITS + 1
"""The reservation commits before the model call: concurrent runs must see it while it runs."""
WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})


@dataclass
class Counter:
    """Statements and commits on the connection, and their totals at each model call."""

    statements: int = 0
    commits: int = 0
    marks: list[tuple[int, int]] = field(default_factory=list)
    _pending: object | None = None

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if verb not in {"BEGIN", "COMMIT", "ROLLBACK"}:
            self.statements += 1
        if verb in WRITES:
            self._wrote()
        return execute(sql, params, many, context)

    def _wrote(self) -> None:
        if not connection.in_atomic_block:
            self.commits += 1
            return
        outermost = connection.atomic_blocks[0]
        if self._pending is not outermost:
            self._pending = outermost
            transaction.on_commit(self._committed)

    def _committed(self) -> None:
        self.commits += 1
        self._pending = None

    def mark(self) -> None:
        self.marks.append((self.statements, self.commits))

    def between(self, first: int, second: int) -> tuple[int, int]:
        (s1, c1), (s2, c2) = self.marks[first], self.marks[second]
        return s2 - s1, c2 - c1


@pytest.fixture(autouse=True)
def no_timed_cancel_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Between tools the loop asks whether the run was cancelled at most every
    ``CANCEL_CHECK_INTERVAL`` seconds; on a slow or loaded machine a round of 20
    calls can outlast the interval and pay one more statement. The counts here
    are about the round's structure, not the machine's speed: the interval is
    made longer than any test."""
    monkeypatch.setattr(runs, "CANCEL_CHECK_INTERVAL", 3600.0)


@pytest.fixture
def echo_tool() -> Iterator[None]:
    with registry.isolated(empty=True) as tools:

        @tool(registry=tools)
        def echo(text: str) -> str:
            """Return the text unchanged."""
            return text

        yield


@contextmanager
def counting(counter: Counter) -> Iterator[None]:
    with connection.execute_wrapper(counter):
        counter.mark()
        yield
        counter.mark()


def counted_turn(user: Any, k: int, profile: Any = None) -> Counter:
    counter = Counter()

    def tool_round(round_index: int) -> Callable[..., Any]:
        def respond(messages: Any, tools: Any, options: Any) -> Any:
            counter.mark()
            return scripted_calls(*(("echo", {"text": f"{round_index}/{i}"}) for i in range(k)))

        return respond

    def answer(messages: Any, tools: Any, options: Any) -> Any:
        counter.mark()
        return scripted_text("done")

    provider = ScriptedProvider([*(tool_round(r) for r in range(ROUNDS)), answer])
    conversation = create_conversation(owner=user, title=f"k={k}", profile=profile)
    with counting(counter):
        run = run_tool_loop(
            conversation=conversation,
            content="Go.",
            provider=provider,
            max_iterations=ROUNDS + 1,
        )
    assert run.status == Run.Status.COMPLETED, run.error_code
    # marks: start of the turn, each of the 6 model calls, end of the turn.
    assert len(counter.marks) == ROUNDS + 3
    return counter


@pytest.mark.parametrize("k", [1, 20])
def test_a_round_costs_at_most_eight_statements_and_two_commits(user, echo_tool, k):
    """Eight on SQLite, six on PostgreSQL."""
    counter = counted_turn(user, k)
    rounds = [counter.between(i, i + 1) for i in range(1, ROUNDS + 1)]
    assert all(cost == rounds[0] for cost in rounds), rounds
    statements, commits = rounds[0]
    assert statements <= ROUND_STATEMENTS, rounds
    assert commits == ROUND_COMMITS, rounds


@pytest.mark.parametrize("k", [1, 20])
def test_starting_and_finishing_a_turn_cost_a_bounded_number_of_statements(user, echo_tool, k):
    counter = counted_turn(user, k)
    start = counter.between(0, 1)
    finish = counter.between(ROUNDS + 1, ROUNDS + 2)
    assert start[0] <= START_STATEMENTS, start
    assert start[1] == START_COMMITS, start
    assert finish[0] <= FINISH_STATEMENTS, finish


def test_the_costs_do_not_depend_on_k(user, echo_tool):
    one, twenty = counted_turn(user, 1), counted_turn(user, 20)
    assert one.marks == twenty.marks


def test_a_profile_with_prices_costs_no_statement_more(user, echo_tool, profile):
    """The prices are read with the run's start, once: no round reads them again."""
    model = profile.language_model
    model.input_price_per_million = model.output_price_per_million = Decimal("1.5")
    model.save()
    profile.system_prompt, profile.max_iterations = "", ROUNDS + 1
    profile.save()
    counter = counted_turn(user, 20, profile=profile)
    rounds = [counter.between(i, i + 1) for i in range(1, ROUNDS + 1)]
    assert rounds == [(ROUND_STATEMENTS, ROUND_COMMITS)] * ROUNDS
    assert counter.between(ROUNDS + 1, ROUNDS + 2)[0] <= FINISH_STATEMENTS
    run = Run.objects.get()
    # The scripted model reports no tokens: priced calls that cost nothing, none unpriced.
    assert run.cost == 0 and run.unpriced_calls == 0
    assert set(ModelCall.objects.values_list("input_price_per_million", flat=True)) == {
        Decimal("1.5")
    }


@pytest.mark.parametrize("k", [1, 20])
def test_a_budget_adds_three_statements_and_one_commit_to_a_round(user, echo_tool, k):
    # A total budget: one period, so no counter is created mid-turn at midnight.
    Budget.objects.create(
        name="overall", scope=Budget.Scope.USER, user=user, period="total", token_limit=10**9
    )
    counter = counted_turn(user, k)
    rounds = [counter.between(i, i + 1) for i in range(1, ROUNDS + 1)]
    assert rounds == [(BUDGETED_ROUND_STATEMENTS, BUDGETED_ROUND_COMMITS)] * ROUNDS
    (overall,) = BudgetCounter.objects.all()
    assert overall.calls == ROUNDS + 1  # every model call charged, the counter made by the first


def test_a_lean_turn_stores_what_the_loop_always_stored(user, echo_tool):
    counted_turn(user, 3)
    run = Run.objects.get()
    messages = list(Message.objects.filter(run=run).order_by("position"))
    assert [m.role for m in messages][:5] == ["user", "assistant", "tool", "tool", "tool"]
    assert [m.position for m in messages] == list(range(len(messages)))
    calls = list(ToolCall.objects.filter(conversation=run.conversation))
    assert len(calls) == 3 * ROUNDS
    assert {c.status for c in calls} == {ToolCall.Status.SUCCEEDED}
    assert all(c.started_at and c.finished_at and c.started_at <= c.finished_at for c in calls)
    assert all(m.tool_call_id and not m.is_error for m in messages if m.role == "tool")
    assert ModelCall.objects.filter(run=run).count() == ROUNDS + 1
    assert (run.iterations, run.cost, run.unpriced_calls) == (ROUNDS + 1, 0, 0)
    # Bumped by every append (with the time taken just before the rows were written).
    assert run.conversation.updated_at >= messages[-2].created_at


def test_a_context_window_costs_no_statement_more(user, echo_tool, profile):
    """The view of each call is chosen in memory; the start reads the history in one query."""
    model = profile.language_model
    model.context_window = 100_000
    model.save()
    profile.system_prompt, profile.max_iterations = "", ROUNDS + 1
    profile.save()
    counter = counted_turn(user, 20, profile=profile)
    rounds = [counter.between(i, i + 1) for i in range(1, ROUNDS + 1)]
    assert rounds == [(ROUND_STATEMENTS, ROUND_COMMITS)] * ROUNDS
    start = counter.between(0, 1)
    assert start[0] <= START_STATEMENTS and start[1] == START_COMMITS, start
    positions = ModelCall.objects.order_by("started_at").values_list("first_position", flat=True)
    assert set(positions) == {0}
