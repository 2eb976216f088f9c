"""Storing a model's turn: the assistant message, its calls and the run's counters at once.

The tool loop (``tool_loop``) drives the rounds; this module is the write it
makes after each model call, and the little it remembers between rounds
(:class:`TurnState`) so that it does not read the conversation again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from conversations.domain import ChatMessage, CompletionResponse
from conversations.models import Budget, Run, ToolApproval
from conversations.models import ToolCall as ToolCallRow
from conversations.selectors import TranscriptTail
from conversations.tools import Tool

from ..transcript.messages import MessageDetails, append_after
from ..usage.ledger import price_call, record_model_call
from ..usage.prices import Prices
from .approvals import hold_turn
from .hot_path import charge_run
from .tool_calls import CallOutcome, check_call

__all__ = ["Checked", "Persisted", "TurnState", "mark_running", "persist_turn"]

Checked = list[tuple[ToolCallRow, CallOutcome | None]]
"""Each call of a turn with its rejection (``None`` when it may run)."""


@dataclass(slots=True)
class TurnState:
    """What the loop knows between rounds without reading it again (it holds the conversation)."""

    tail: TranscriptTail
    """The conversation's end: next position, open calls, call ids taken."""
    budgets_apply: bool | None = None
    """Whether a budget covers the run, as last read (``None``: not read yet)."""
    prices: Prices | None = None
    """The language model's prices, read once per run (``None``: not read yet)."""


@dataclass(frozen=True, slots=True)
class Persisted:
    """What storing a turn decided about its calls."""

    checked: Checked
    """Each call with its rejection (``None`` when it may run)."""
    approvals: list[ToolApproval]
    """The approvals the turn waits for (empty: it was not held)."""
    cancel_requested: bool
    """The run was asked to stop before the turn was stored: none of its calls may start."""


def persist_turn(
    run: Run,
    response: CompletionResponse,
    turn: ChatMessage,
    started_at: datetime,
    latency_ms: int,
    *,
    counts_as_round: bool,
    tools: Mapping[str, Tool],
    needs_approval: Mapping[str, str],
    state: TurnState,
    budgets: Sequence[Budget],
    first_delta_ms: int | None = None,
) -> Persisted:
    """Store the assistant turn (``turn``: ``response`` as a message), its calls and the run's
    counters in one transaction.

    Calls that will be executed are stored ``running``, before any of them
    starts: after a crash they are answered as interrupted, never executed
    again (they may have had side effects). When any of them needs approval,
    the whole turn is held instead: no call runs. When the run was asked to
    stop (read by the statement that charges the run, the transaction's
    first), its calls are stored as they came, neither running nor held:
    the loop answers each as cancelled and starts none.

    ``budgets``: those the request was checked against; it is charged to
    them (empty: none covered it). The statements: the run's counters (which
    also fence the run), the conversation's ``updated_at``, the message, its
    calls, the budgets' counters (when ``budgets``), the ledger row.
    """
    usage = response.usage
    details = MessageDetails.from_response(response, latency_ms=latency_ms)
    priced = price_call(run=run, usage=usage, prices=state.prices)
    state.prices = priced[0]
    checked: Checked = []
    levels: dict[int, str] = {}
    cancel_requested = False

    def prepare(rows: list[ToolCallRow]) -> None:
        # Checked before they are inserted, so runnable calls go in ``running``.
        checked.extend((row, check_call(row=row, tools=tools)) for row in rows)
        runnable = [row for row, rejection in checked if rejection is None]
        if cancel_requested or any(row.name in needs_approval for row in runnable):
            return  # held below, once the rows have their keys
        marked = timezone.now()
        for row in runnable:
            row.status, row.started_at = ToolCallRow.Status.RUNNING, marked

    with transaction.atomic():
        cancel_requested = charge_run(
            run, usage, rounds=1 if counts_as_round else 0, cost=priced[1]
        )
        (message,) = append_after(
            conversation=run.conversation,
            messages=[turn],
            tail=state.tail,
            run=run,
            details=[details],
            prepare_calls=prepare,
        )
        record_model_call(
            run=run,
            started_at=started_at,
            latency_ms=latency_ms,
            usage=usage,
            model=response.model,
            message=message,
            time_to_first_token_ms=first_delta_ms,
            priced=priced,
            run_charged=True,
            budgets=budgets,
        )
        # Only calls that could run need a decision; refused ones are answered on resume.
        runnable = [row for row, rejection in checked if rejection is None]
        levels = {r.pk: needs_approval[r.name] for r in runnable if r.name in needs_approval}
        approvals: list[ToolApproval] = []
        if levels and not cancel_requested:
            rows = [row for row, _ in checked]
            approvals = hold_turn(run=run, rows=rows, levels=levels)
    return Persisted(checked, approvals, cancel_requested)


def mark_running(rows: list[ToolCallRow]) -> None:
    if rows:
        marked = timezone.now()
        ToolCallRow.objects.filter(pk__in=[r.pk for r in rows]).update(
            status=ToolCallRow.Status.RUNNING, started_at=marked
        )
        for row in rows:
            row.status, row.started_at = ToolCallRow.Status.RUNNING, marked
