"""The tool loop: ask the model, persist its turn, run its tools, persist the results.

This is the only loop in the code base. Its guarantees:

- Every step is persisted as it happens, each in its own short transaction;
  no transaction is open while the provider is asked or a tool runs.
- A turn with a call that needs a human decision is held whole (nothing of
  it runs) until every such call is decided; see ``approvals``.
- A tool is never executed twice: calls are marked ``running`` (committed)
  before any of them starts, and recovery answers a ``running`` call as
  interrupted instead of executing it again.
- The stored history is always one every provider accepts: whatever ends a
  run (an answer, the cap, a provider error, a cancellation, a crash), each
  call gets exactly one result.
- Streaming changes what watchers see, never what is stored. When the
  profile streams (``Profile.stream``), each delta of an answer is published
  live and kept as the run's in-flight snapshot (``live``), and the final
  answer is stored exactly as a whole one would be. A cancellation noticed
  while an answer streams stores the text received so far (finish reason
  ``cancelled``, no calls: those still arriving are dropped, never run) or,
  when no text came, nothing but the ledger row; the run ends ``cancelled``.
  A cancellation the stream did not see in time is read by the statement
  that stores the turn: then none of the turn's calls starts (each is
  answered cancelled) and the run ends ``cancelled``.
- The calls of a turn run concurrently, each within its timeout (see
  ``tool_runner``); their results are stored together, in the order of the calls.

A round costs a constant number of queries and commits whatever the number of
calls (see docs/adr/0003-tool-loop-persistence.md for the batching trade-off).
The run's lifecycle lives in ``runs``, checking and answering calls in
``tool_calls``, asking the model in ``asking``, storing its turn in ``turns``,
what the rounds work with in ``rounds``; this module only drives the rounds.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Sequence

from django.db import DatabaseError

from conversations import signals
from conversations.conf import app_settings
from conversations.domain import CompletionResponse
from conversations.domain.output import check_output
from conversations.exceptions import (
    BudgetExceeded,
    ConfigurationError,
    ContextTooLarge,
    ConversationsError,
    ProviderError,
    RunAlreadyClaimed,
    RunCancelled,
    RunFencedOut,
)
from conversations.mcp.tools import mcp_connections
from conversations.models import Attachment, Conversation, Profile, Run, ToolApproval
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.base import ChatProvider
from conversations.selectors import history_and_tail

from ..configuration.providers import build_provider, close_provider
from ..usage import tracing
from .agents import callers_of
from .approvals import held_calls, send_requested
from .asking import ask
from .context import context_window_for, read_bound
from .heartbeat import Heartbeat
from .live import LiveRun
from .output import (
    OUTPUT_INVALID,
    SchemaArgument,
    output_schema_for,
    output_spec,
    store_repair_turn,
    with_output,
)
from .rounds import RequestSetup, Round, TurnState, request_setup, with_prompt_cache
from .runs import (
    CancelWatch,
    StartedTurn,
    begin_turn,
    claim_run,
    finish_run,
    finish_run_after_error,
    reload_run,
    resolve_profile,
    wait_for_agents,
)
from .tool_calls import persist_outcomes, reject_call, storage_failed
from .tool_runner import run_calls
from .turns import Checked, mark_running, persist_turn

__all__ = ["RequestSetup", "execute_run", "request_setup", "run_agent", "run_tool_loop"]

logger = logging.getLogger("conversations.tool_loop")

SHRINK_ON_REFUSAL = 0.75
"""A view a vendor refused as too long is retried once, with at most this share of it."""


def run_tool_loop(
    *,
    conversation: Conversation,
    content: str | None = None,
    profile: Profile | None = None,
    provider: ChatProvider | None = None,
    max_iterations: int | None = None,
    output_schema: SchemaArgument | None = None,
    attachments: Sequence[Attachment] = (),
) -> Run:
    """Run one user turn to its end and return the finished :class:`Run`.

    ``profile`` defaults to the conversation's, then to the default profile;
    ``provider`` defaults to the profile's. ``output_schema`` (a JSON Schema,
    a stored :class:`OutputSchema` or its sha256; default: the profile's)
    makes the run end in validated JSON (``Run.output``). Raises
    :class:`ConversationBusy` when another run is running on the conversation.
    ``attachments`` are referenced by the user message, in order.
    """
    profile = resolve_profile(conversation=conversation, profile=profile, provider=provider)
    schema = output_schema_for(schema=output_schema, profile=profile)
    built = provider is None
    if provider is None:
        provider = build_provider(profile)  # type: ignore[arg-type]  # resolved above
    try:
        # Started claimed: this process executes the run, no worker has to take it.
        started = begin_turn(
            conversation=conversation,
            content=content,
            profile=profile,
            provider=provider,
            max_iterations=max_iterations,
            claim=True,
            output_schema=schema,
            attachments=attachments,
        )
        return _execute(started.run, provider, started)
    finally:
        if built:
            close_provider(provider)


def execute_run(*, run: Run, provider: ChatProvider | None = None) -> Run:
    """Drive a ``running`` run to a terminal status (the loop itself).

    The run is claimed first (:func:`~conversations.services.loop.runs.claim_run`),
    so it executes at most once whatever delivers it: a run that has already
    ended is returned as it is, one another process has claimed raises
    :class:`RunAlreadyClaimed`.

    A configuration problem found here (no usable provider, a key that does
    not resolve) ends the run ``failed`` with its code and is raised again.
    """
    if not claim_run(run=run):
        run.refresh_from_db()
        if run.status != Run.Status.RUNNING:
            return run
        raise RunAlreadyClaimed(f"run {run.pk} is already being executed by {run.worker}")
    return _execute(run, provider, None)


def _execute(run: Run, provider: ChatProvider | None, started: StartedTurn | None) -> Run:
    """Drive a run this process holds; ``started``: what starting it read (else read here)."""
    profile = run.profile
    built = provider is None
    try:
        if provider is None:
            if profile is None:
                raise ConfigurationError("the run has no profile, so a provider must be given")
            provider = build_provider(profile)
        settings = started.tool_settings if started is not None else None
        setup = request_setup(profile=profile, settings=settings, run_child=run_agent)
        request = with_output(setup, output_spec(run))
        adapter = profile.language_model.provider.adapter if profile is not None else ""
        request = with_prompt_cache(request, conversation_id=run.conversation_id, adapter=adapter)
    except ConversationsError as exc:
        finish_run_after_error(run=run, exc=exc)
        raise
    # Without a profile (a provider given directly) answers are asked for whole, as always.
    live = LiveRun(run.pk, stream=profile is not None and profile.stream, callers=callers_of(run))
    round_ = Round(run, provider, request, CancelWatch(run), live)
    facts = _agent_facts(run) if live.callers else {}
    live.agent_event("started", facts)
    try:
        with (
            Heartbeat(run, interval=app_settings().RUN_LEASE_SECONDS / 3),
            mcp_connections(),
            tracing.agent_span(
                profile=profile.slug if profile else "",
                conversation_id=run.conversation_id,
                provider=run.provider,
            ),
        ):
            return _rounds(round_, started)
    finally:
        # However the run stopped, nothing streams any more and watchers re-read.
        live.clear()
        live.changed()
        live.agent_event("finished", {**facts, "status": run.status})
        if built:
            close_provider(provider)


def _agent_facts(run: Run) -> dict[str, str]:
    """What ``agent.started`` and ``agent.finished`` say about an agent's run (one query)."""
    call = (
        ToolCallRow.objects.filter(agent_conversations=run.conversation_id)
        .values_list("call_id", flat=True)
        .first()
    )
    return {
        "conversation": str(run.conversation_id),
        "profile": run.profile.slug if run.profile else "",
        "call_id": call or "",
    }


def run_agent(
    *, conversation: Conversation, content: str, profile: Profile, parent_run: Run | None
) -> Run:
    """An agent's run, started by ``parent_run``'s call, driven to its end in this thread.

    What the agent tools (``agents.agent_tools``) run; ``/mcp/`` serves them with it.
    """
    schema = output_schema_for(schema=None, profile=profile)
    provider = build_provider(profile)
    try:
        started = begin_turn(
            conversation=conversation,
            content=content,
            profile=profile,
            provider=provider,
            max_iterations=None,
            claim=True,
            output_schema=schema,
            parent_run=parent_run,
        )
        return _execute(started.run, provider, started)
    finally:
        close_provider(provider)


# The rounds ----------------------------------------------------------------------------


def _rounds(round_: Round, started: StartedTurn | None) -> Run:
    """Drive the rounds (:func:`_loop`) and end the run however they stop."""
    run = round_.run
    try:
        return _loop(round_, started)
    except ProviderError as exc:
        logger.warning("run %s: provider error %s", run.pk, exc.code)
        return finish_run(
            run=run, status=Run.Status.FAILED, error_code=exc.code, error_message=exc.detail
        )
    except RunCancelled:
        return finish_run(run=run, status=Run.Status.CANCELLED, error_code="run_cancelled")
    except BudgetExceeded as exc:
        return finish_run(
            run=run,
            status=Run.Status.BUDGET_EXHAUSTED,
            error_code=exc.code,
            error_message=exc.detail,
        )
    except RunFencedOut:
        # Recovery ended the run while this process was paused: another run
        # may hold the conversation now, so stop without writing anything.
        logger.warning("run %s: fenced out (ended meanwhile by another process); stopping", run.pk)
        return reload_run(run)
    except BaseException as exc:
        # Not swallowed: record the failure so the conversation stays usable, then re-raise.
        finish_run_after_error(run=run, exc=exc)
        raise


def _loop(round_: Round, started: StartedTurn | None) -> Run:
    """Ask, store the turn, run its calls, store their answers; until an answer without calls."""
    run = round_.run
    if _resume_held_turn(round_) and _agents_wait(round_):
        return run
    state = _turn_state(round_, started)
    while run.iterations < run.max_iterations:
        round_.watch.raise_if_cancelled()
        response, checked, approvals = _answer(round_, state, counts_as_round=True)
        if approvals:
            return _wait_for_decisions(run, approvals)
        if not checked:
            return _settle(round_, state, response)
        if _run_calls(round_, checked, state):
            if _agents_wait(round_):
                return run
            state = _turn_state(round_, None)  # the held call was answered past ``state``
    # Every round asked for tools: one more call, with none offered, for the answer.
    round_.watch.raise_if_cancelled()
    response, checked, _ = _answer(round_.offering_none(), state, counts_as_round=False)
    if checked:
        # Tools were not offered; answer each call so the history stays valid.
        rejected = [reject_call(row=row) for row, _ in checked]
        persist_outcomes(run=run, outcomes=rejected, tail=state.tail)
    return _finish(run, state, response, Run.Status.MAX_ITERATIONS)


def _resume_held_turn(round_: Round) -> bool:
    """A run resuming after a decision first answers the turn it held (before reading history).

    ``True``: an agent of the turn still waits (the run waits again).
    """
    run = round_.run
    # Only a run that has had a round can have held one (a round counts when held).
    held = held_calls(run=run, tools=round_.request.tools) if run.iterations else []
    if held:
        mark_running([row for row, rejection in held if rejection is None])
        round_.live.changed()
        return _run_calls(round_, held)
    return False


def _agents_wait(round_: Round) -> bool:
    """A call's agent waits for an approval: ``True`` if the run now waits too.

    ``False``: every such agent was decided meanwhile, and their calls are
    answered now (run again: each answers from its ended child).
    """
    while not wait_for_agents(run=round_.run):
        if not _resume_held_turn(round_):
            return False
    return True


def _turn_state(round_: Round, started: StartedTurn | None) -> TurnState:
    """The history and its tail, read once: the run holds the conversation (one running run
    at most), and each round keeps them in step with what it persists."""
    run = round_.run
    context = context_window_for(run.profile)
    if started is None:
        history, tail = history_and_tail(
            conversation=run.conversation, profile=run.profile, within=read_bound(run.profile)
        )
        return TurnState(history, tail, context=context)
    # Read when the run started, in the transaction that inserted it: no
    # cancellation could flag a run nobody else could see yet.
    assert started.history is not None  # started claimed: the history was read
    round_.watch.read(False)
    return TurnState(
        started.history,
        started.tail,
        budgets_apply=started.budgets_apply,
        prices=started.prices,
        context=context,
    )


def _wait_for_decisions(run: Run, approvals: list[ToolApproval]) -> Run:
    send_requested(run=run, approvals=approvals)
    logger.info("run %s waits for %d approval(s)", run.pk, len(approvals))
    return run


def _finish(run: Run, state: TurnState, response: CompletionResponse, status: str) -> Run:
    return finish_run(
        run=run,
        status=status,
        final_content=response.content,
        answered=not state.tail.open_calls,
    )


def _settle(round_: Round, state: TurnState, response: CompletionResponse) -> Run:
    """End a run on its final answer; with an output schema, only once the answer satisfies it.

    An answer that fails gets one repair turn, asked with no tool offered (so
    every vendor enforces the schema on it); a second failure ends the run
    ``failed`` (``output_invalid``, the pointer in the detail). Never a loop.
    """
    run, spec = round_.run, round_.request.options.output_schema
    if spec is None:
        return _finish(run, state, response, Run.Status.COMPLETED)
    depth = app_settings().MAX_JSON_DEPTH
    check = check_output(response.content, spec.schema, max_depth=depth)
    if not check.valid:
        store_repair_turn(run=run, state=state, check=check)
        round_.watch.raise_if_cancelled()
        response, calls, _ = _answer(round_.offering_none(), state, counts_as_round=False)
        if calls:
            # No tool was offered; each call is answered so the history stays valid.
            persist_outcomes(
                run=run, outcomes=[reject_call(row=r) for r, _ in calls], tail=state.tail
            )
        check = check_output(response.content, spec.schema, max_depth=depth)
        if calls or not check.valid:
            return finish_run(
                run=run,
                status=Run.Status.FAILED,
                final_content=response.content,
                error_code=OUTPUT_INVALID,
                error_message=f"the answer does not satisfy the output schema {check.describe()}",
                answered=not state.tail.open_calls,
            )
    return finish_run(
        run=run,
        status=Run.Status.COMPLETED,
        final_content=response.content,
        answered=not state.tail.open_calls,
        output=check,
    )


def _answer(
    round_: Round, state: TurnState, *, counts_as_round: bool
) -> tuple[CompletionResponse, Checked, list[ToolApproval]]:
    """Ask the model and store its turn; a turn a cancellation cut short is stored, then stops.

    Returns the response, its calls with their rejections, and the approvals
    the turn waits for; the turn stored joins ``state.history``.
    """
    try:
        asked = ask(round_, state)
    except ContextTooLarge as exc:
        if exc.status_code is None:
            raise  # found before sending: no smaller view fits either
        # The vendor counted more than the estimate: once, a view a quarter smaller.
        logger.warning("run %s: the provider found the request too long", round_.run.pk)
        asked = ask(round_, state, shrink=SHRINK_ON_REFUSAL)
    # Forgotten before the turn is committed, never after: a watcher that has read
    # the stored turn then cannot read its snapshot and show the answer twice.
    round_.live.clear()
    persisted = persist_turn(round_, state, asked, counts_as_round=counts_as_round)
    round_.live.changed()
    if asked.failure is not None:
        raise asked.failure  # stored what streamed before the deadline; the run fails
    if asked.cancelled:
        raise RunCancelled("the run was cancelled")
    if persisted.cancel_requested:
        # Asked for while the answer streamed, too late for the stream to see:
        # no call of this turn starts; the tool runner answers each as cancelled.
        round_.watch.read(True)
    return asked.response, persisted.checked, persisted.approvals


def _run_calls(round_: Round, checked: Checked, state: TurnState | None = None) -> bool:
    """Execute the calls of one assistant turn and answer each; the answers join the history.

    The runnable calls run concurrently (see ``tool_runner``); the answers of
    the whole turn are stored together once every call has one. ``state``:
    none for the turn a resumed run held (the history is read after it).
    Returns ``True`` when an agent's call has no answer yet (its run waits
    for an approval): that call stays open, ``awaiting_approval``.
    """
    run, tools, watch = round_.run, round_.request.tools, round_.watch
    runnable = [(row, tools[row.name]) for row, rejection in checked if rejection is None]
    executed = iter(run_calls(run=run, calls=runnable, watch=watch))
    ordered = [next(executed) if rejection is None else rejection for _, rejection in checked]
    tail = state.tail if state is not None else None
    pending = any(outcome.pending for outcome in ordered)
    messages = [outcome.to_message() for outcome in ordered if not outcome.pending]
    try:
        held = persist_outcomes(run=run, outcomes=ordered, tail=tail, messages=messages)
    except DatabaseError:
        # The tools have run: tell the model they failed (never "interrupted",
        # which invites a repeat) and keep the reason for admins. Stored the
        # ORM's way, which reads the conversation again.
        logger.exception("run %s: the results of a turn could not be stored", run.pk)
        detail = traceback.format_exc()
        ordered = [storage_failed(outcome=outcome, detail=detail) for outcome in ordered]
        messages = [outcome.to_message() for outcome in ordered if not outcome.pending]
        held = persist_outcomes(run=run, outcomes=ordered, messages=messages)
        if state is not None:
            state.tail = history_and_tail(conversation=run.conversation, profile=None)[1]
    if held is not None and state is not None:
        # Receivers of tool_call_finished run below, in this thread: they may cancel.
        listening = signals.tool_call_finished.has_listeners(ToolCallRow)
        watch.read(held.cancel_requested, fresh=not listening)
        state.budgets_apply = held.budgets_apply
    for outcome in ordered:
        if not outcome.pending:
            signals.tool_call_finished.send(
                sender=ToolCallRow, tool_call=outcome.row, run=run, result=outcome.content
            )
    if watch.seen:
        raise RunCancelled("the run was cancelled")
    round_.live.changed()
    if state is not None:
        state.history.extend(messages)
    return pending
