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
``tool_calls``; this module only drives the rounds.
"""

from __future__ import annotations

import dataclasses
import logging
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from django.db import DatabaseError

from conversations import signals
from conversations.conf import app_settings
from conversations.domain import ChatMessage, CompletionResponse, ToolSpec
from conversations.exceptions import (
    BudgetExceeded,
    ConfigurationError,
    ConversationsError,
    ProviderError,
    RunAlreadyClaimed,
    RunCancelled,
    RunFencedOut,
)
from conversations.mcp.tools import mcp_connections
from conversations.models import Conversation, Profile, Run, ToolApproval
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.base import ChatProvider, CompletionOptions
from conversations.selectors import (
    ToolSettings,
    available_tools,
    history_and_tail,
    tool_settings,
)
from conversations.tools import Tool

from ..configuration.providers import build_provider, close_provider, completion_options
from ..usage import tracing
from .approvals import approval_levels, held_calls, send_requested
from .live import LiveRun, ask
from .runs import (
    CancelWatch,
    Heartbeat,
    StartedTurn,
    begin_turn,
    claim_run,
    finish_run,
    finish_run_after_error,
    reload_run,
    resolve_profile,
)
from .tool_calls import (
    persist_outcomes,
    reject_call,
    storage_failed,
)
from .tool_runner import run_calls
from .turns import Checked, TurnState, mark_running, persist_turn

__all__ = ["RequestSetup", "execute_run", "request_setup", "run_tool_loop"]

logger = logging.getLogger("conversations.tool_loop")


def run_tool_loop(
    *,
    conversation: Conversation,
    content: str | None = None,
    profile: Profile | None = None,
    provider: ChatProvider | None = None,
    max_iterations: int | None = None,
) -> Run:
    """Run one user turn to its end and return the finished :class:`Run`.

    ``profile`` defaults to the conversation's, then to the default profile;
    ``provider`` defaults to the profile's. Raises :class:`ConversationBusy`
    when another run is running on the conversation.
    """
    profile = resolve_profile(conversation=conversation, profile=profile, provider=provider)
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
        request = request_setup(profile=profile, settings=settings)
    except ConversationsError as exc:
        finish_run_after_error(run=run, exc=exc)
        raise
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
            return _drive(run, provider, profile, request, started)
    finally:
        if built:
            close_provider(provider)


@dataclass(frozen=True, slots=True)
class RequestSetup:
    """What a profile offers and asks for in every request of a run."""

    tools: dict[str, Tool]
    """The tools a run may execute, by name."""
    specs: list[ToolSpec]
    """Their specs, as offered to the model (empty: no ``tools`` key at all)."""
    options: CompletionOptions
    """Model, sampling and tool choice (``None`` when no tool is offered)."""
    approvals: Mapping[str, str] = field(default_factory=dict)
    """Who must approve the calls of each tool that needs approval (``owner``/``staff``)."""


def request_setup(*, profile: Profile | None, settings: ToolSettings | None = None) -> RequestSetup:
    """Tools and options of a request for ``profile``: the loop and the dry-run export share it.

    ``settings``: the tool settings as the caller has just read them (else one query reads them).
    """
    settings = settings if settings is not None else tool_settings()
    tools = available_tools(allowed=profile.allowed_tools if profile else None, settings=settings)
    specs = [tool.spec for tool in tools.values()]
    options = completion_options(profile, tools_offered=bool(specs))
    levels = approval_levels(profile=profile, tools=tools.values(), settings=settings)
    return RequestSetup(tools, specs, options, levels)


# The rounds ----------------------------------------------------------------------------


def _drive(
    run: Run,
    provider: ChatProvider,
    profile: Profile | None,
    request: RequestSetup,
    started: StartedTurn | None,
) -> Run:
    # Without a profile (a provider given directly) answers are asked for whole, as always.
    live = LiveRun(run.pk, stream=profile is not None and profile.stream)
    try:
        return _rounds(run, provider, profile, request, live, started)
    finally:
        # However the run stopped, nothing streams any more and watchers re-read.
        live.clear()
        live.changed()


def _rounds(
    run: Run,
    provider: ChatProvider,
    profile: Profile | None,
    request: RequestSetup,
    live: LiveRun,
    started: StartedTurn | None,
) -> Run:
    tools, specs, options = request.tools, request.specs, request.options
    watch = CancelWatch(run)
    try:
        # A run resuming after a decision first answers the turn it held.
        # Only a run that has had a round can have held one (a round counts when held).
        held = held_calls(run=run, tools=tools) if run.iterations else []
        if held:
            mark_running([row for row, rejection in held if rejection is None])
            live.changed()
            _run_calls(run, held, tools, watch)
            live.changed()
        # The run holds the conversation (one running run at most), so the history
        # and its tail are read once and then kept in step with what each round persists.
        if started is not None:
            # Read when the run started, in the transaction that inserted it: no
            # cancellation could flag a run nobody else could see yet.
            assert started.history is not None  # started claimed: the history was read
            history, tail = started.history, started.tail
            state = TurnState(tail, budgets_apply=started.budgets_apply, prices=started.prices)
            watch.read(False)
        else:
            history, tail = history_and_tail(conversation=run.conversation, profile=profile)
            state = TurnState(tail)
        while run.iterations < run.max_iterations:
            watch.raise_if_cancelled()
            response, turn, checked, approvals = _answer(
                run,
                provider,
                history,
                specs,
                options,
                watch,
                live,
                request,
                state,
                counts_as_round=True,
            )
            if approvals:
                send_requested(run=run, approvals=approvals)
                logger.info("run %s waits for %d approval(s)", run.pk, len(approvals))
                return run
            history.append(turn)
            if not checked:
                return finish_run(
                    run=run,
                    status=Run.Status.COMPLETED,
                    final_content=response.content,
                    answered=not tail.open_calls,
                )
            answers = _run_calls(run, checked, tools, watch, state)
            live.changed()
            history.extend(answers)
        # Every round asked for tools: one more call, with none offered, for the answer.
        watch.raise_if_cancelled()
        final_options = dataclasses.replace(options, tool_choice=None, parallel_tool_calls=None)
        offer_none = dataclasses.replace(request, tools={}, approvals={})
        response, _turn, checked, _ = _answer(
            run,
            provider,
            history,
            [],
            final_options,
            watch,
            live,
            offer_none,
            state,
            counts_as_round=False,
        )
        if checked:
            # Tools were not offered; answer each call so the history stays valid.
            rejected = [reject_call(row=row) for row, _ in checked]
            persist_outcomes(run=run, outcomes=rejected, tail=tail)
        return finish_run(
            run=run,
            status=Run.Status.MAX_ITERATIONS,
            final_content=response.content,
            answered=not tail.open_calls,
        )
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


def _answer(
    run: Run,
    provider: ChatProvider,
    history: Sequence[ChatMessage],
    specs: Sequence[ToolSpec],
    options: CompletionOptions,
    watch: CancelWatch,
    live: LiveRun,
    request: RequestSetup,
    state: TurnState,
    *,
    counts_as_round: bool,
) -> tuple[CompletionResponse, ChatMessage, Checked, list[ToolApproval]]:
    """Ask the model and store its turn; a turn a cancellation cut short is stored, then stops.

    Returns the response, the assistant message stored (what the history gets),
    its calls with their rejections, and the approvals the turn waits for.
    """
    asked = ask(
        run, provider, history, specs, options, watch, live, budgets_apply=state.budgets_apply
    )
    state.budgets_apply = asked.budgets_apply
    turn = asked.response.to_message()
    # Forgotten before the turn is committed, never after: a watcher that has read
    # the stored turn then cannot read its snapshot and show the answer twice.
    live.clear()
    persisted = persist_turn(
        run,
        asked.response,
        turn,
        asked.started_at,
        asked.latency_ms,
        counts_as_round=counts_as_round,
        tools=request.tools,
        needs_approval=request.approvals,
        state=state,
        first_delta_ms=asked.first_delta_ms,
        budgets=asked.budgets,
    )
    live.changed()
    if asked.cancelled:
        raise RunCancelled("the run was cancelled")
    if persisted.cancel_requested:
        # Asked for while the answer streamed, too late for the stream to see:
        # no call of this turn starts; the tool runner answers each as cancelled.
        watch.read(True)
    return asked.response, turn, persisted.checked, persisted.approvals


def _run_calls(
    run: Run,
    checked: Checked,
    tools: dict[str, Tool],
    watch: CancelWatch,
    state: TurnState | None = None,
) -> list[ChatMessage]:
    """Execute the calls of one assistant turn and answer each; return the answers in call order.

    The runnable calls run concurrently (see ``tool_runner``); the answers of
    the whole turn are stored together once every call has one.
    """
    runnable = [(row, tools[row.name]) for row, rejection in checked if rejection is None]
    executed = iter(run_calls(run=run, calls=runnable, watch=watch))
    ordered = [next(executed) if rejection is None else rejection for _, rejection in checked]
    tail = state.tail if state is not None else None
    messages = [outcome.to_message() for outcome in ordered]
    try:
        held = persist_outcomes(run=run, outcomes=ordered, tail=tail, messages=messages)
    except DatabaseError:
        # The tools have run: tell the model they failed (never "interrupted",
        # which invites a repeat) and keep the reason for admins. Stored the
        # ORM's way, which reads the conversation again.
        logger.exception("run %s: the results of a turn could not be stored", run.pk)
        detail = traceback.format_exc()
        ordered = [storage_failed(outcome=outcome, detail=detail) for outcome in ordered]
        messages = [outcome.to_message() for outcome in ordered]
        held = persist_outcomes(run=run, outcomes=ordered, messages=messages)
        if state is not None:
            state.tail = history_and_tail(conversation=run.conversation, profile=None)[1]
    if held is not None and state is not None:
        # Receivers of tool_call_finished run below, in this thread: they may cancel.
        listening = signals.tool_call_finished.has_listeners(ToolCallRow)
        watch.read(held.cancel_requested, fresh=not listening)
        state.budgets_apply = held.budgets_apply
    for outcome in ordered:
        signals.tool_call_finished.send(
            sender=ToolCallRow, tool_call=outcome.row, run=run, result=outcome.content
        )
    if watch.seen:
        raise RunCancelled("the run was cancelled")
    return messages
