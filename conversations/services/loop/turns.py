"""Storing a model's turn: the assistant message, its calls and the run's counters at once.

The tool loop (``tool_loop``) drives the rounds; this module is the write it
makes after each model call (what it remembers between rounds so that it
does not read the conversation again, :class:`~.rounds.TurnState`, moves on
with it).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from conversations.models import ToolApproval
from conversations.models import ToolCall as ToolCallRow

from ..transcript.messages import MessageDetails, append_after
from ..transcript.provider_activity import record_provider_activity
from ..usage.ledger import price_call, record_model_call
from .approvals import hold_turn
from .asking import Asked
from .hot_path import charge_run
from .rounds import Round, TurnState
from .tool_calls import CallOutcome, check_call

__all__ = ["Checked", "Persisted", "mark_running", "persist_turn"]

Checked = list[tuple[ToolCallRow, CallOutcome | None]]
"""Each call of a turn with its rejection (``None`` when it may run)."""


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
    round_: Round, state: TurnState, asked: Asked, *, counts_as_round: bool
) -> Persisted:
    """Store the assistant turn (``asked.response`` as a message), its calls and the run's
    counters in one transaction; the message joins ``state.history``.

    Returns what storing it decided about its calls (see :class:`Persisted`).

    Calls that will be executed are stored ``running``, before any of them
    starts: after a crash they are answered as interrupted, never executed
    again (they may have had side effects). When any of them needs approval,
    the whole turn is held instead: no call runs. When the run was asked to
    stop (read by the statement that charges the run, the transaction's
    first), its calls are stored as they came, neither running nor held:
    the loop answers each as cancelled and starts none.

    The call is charged to the budgets it was checked against
    (``asked.budgets``; none: none covered it). The statements: the run's
    counters (which also fence the run), the conversation's ``updated_at``,
    the message, its calls, the provider's own tool calls and the citations
    (when any), the budgets' counters (when any), the ledger row.
    """
    run, response = round_.run, asked.response
    tools, needs_approval = round_.request.tools, round_.request.approvals
    turn = response.to_message()
    usage = response.usage
    details = MessageDetails.from_response(response, latency_ms=asked.latency_ms)
    searches = sum(call.kind == "web_search" for call in response.provider_tool_calls)
    priced = price_call(run=run, usage=usage, prices=state.prices, web_searches=searches)
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
            run, usage, rounds=1 if counts_as_round else 0, cost=priced[1], touch=True
        )
        (message,) = append_after(
            conversation=run.conversation,
            messages=[turn],
            tail=state.tail,
            run=run,
            details=[details],
            touch=False,
            prepare_calls=prepare,
        )
        record_provider_activity(message=message, response=response)
        record_model_call(
            run=run,
            started_at=asked.started_at,
            latency_ms=asked.latency_ms,
            usage=usage,
            model=response.model,
            message=message,
            time_to_first_token_ms=asked.first_delta_ms,
            priced=priced,
            run_charged=True,
            budgets=asked.budgets,
            web_searches=searches,
            first_position=asked.first_position,
            context_summary_id=asked.summary_id,
        )
        # Only calls that could run need a decision; refused ones are answered on resume.
        runnable = [row for row, rejection in checked if rejection is None]
        levels = {r.pk: needs_approval[r.name] for r in runnable if r.name in needs_approval}
        approvals: list[ToolApproval] = []
        if levels and not cancel_requested:
            rows = [row for row, _ in checked]
            approvals = hold_turn(run=run, rows=rows, levels=levels)
    state.history.append(turn)
    return Persisted(checked, approvals, cancel_requested)


def mark_running(rows: list[ToolCallRow]) -> None:
    if rows:
        marked = timezone.now()
        ToolCallRow.objects.filter(pk__in=[r.pk for r in rows]).update(
            status=ToolCallRow.Status.RUNNING, started_at=marked
        )
        for row in rows:
            row.status, row.started_at = ToolCallRow.Status.RUNNING, marked
