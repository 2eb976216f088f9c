"""The tool loop: ask the model, persist its turn, run its tools, persist the results.

This is the only loop in the code base. Its guarantees:

- Every step is persisted as it happens, each in its own short transaction;
  no transaction is open while the provider is asked or a tool runs.
- A tool is never executed twice: calls are marked ``running`` (committed)
  before any of them starts, and recovery answers a ``running`` call as
  interrupted instead of executing it again.
- The stored history is always one every provider accepts: whatever ends a
  run (an answer, the cap, a provider error, a cancellation, a crash), each
  call gets exactly one result.

A round costs a constant number of queries and commits whatever the number of
calls (see docs/adr/0003-tool-loop-persistence.md for the batching trade-off).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from conversations import signals
from conversations.conf import app_settings
from conversations.domain import ChatMessage, CompletionResponse, ToolSpec, Usage
from conversations.exceptions import (
    ConfigurationError,
    ConversationBusy,
    ConversationsError,
    ProviderError,
    RunAlreadyClaimed,
    RunCancelled,
)
from conversations.models import Conversation, Profile, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.base import ChatProvider, CompletionOptions
from conversations.selectors import get_history
from conversations.services.messages import MessageDetails, append_messages
from conversations.services.providers import (
    build_provider,
    completion_options,
    get_default_profile,
)
from conversations.services.recovery import ANSWER_TEXTS, answer_open_calls, recover_runs
from conversations.services.tools import available_tools
from conversations.tools import (
    Tool,
    ToolContext,
    execute,
    registry,
    truncate_result,
    validate_arguments,
)

__all__ = [
    "claim_run",
    "end_unclaimed_run",
    "execute_run",
    "history_for_provider",
    "request_setup",
    "run_tool_loop",
    "start_run",
    "tool_error_text",
    "worker_name",
]

logger = logging.getLogger("conversations.tool_loop")

# What the model is told, word for word (tests pin these).
UNKNOWN_TOOL = 'Error: unknown tool "{name}"'
NOT_PERMITTED = 'Error: tool "{name}" not permitted'
INVALID_ARGUMENTS = 'Error: invalid arguments for tool "{name}": {violations}'
RAW_ARGUMENTS = 'Error: arguments for tool "{name}" are not a JSON object'
TOOL_FAILED = 'Error: tool "{name}" failed.'

CANCEL_CHECK_INTERVAL = 0.5
"""Seconds between cancellation checks while tools run (keeps queries per round flat)."""


def tool_error_text(template: str, name: str, **extra: str) -> str:
    """One of the pinned error texts, filled in."""
    return template.format(name=name, **extra)


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What became of one call: its status and the result the model sees."""

    row: ToolCallRow
    status: str
    content: str
    error: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None


# Entry points ------------------------------------------------------------------


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
    profile = _resolve_profile(conversation, profile, provider)
    if provider is None:
        provider = build_provider(profile)  # type: ignore[arg-type]  # resolved above
    run = start_run(
        conversation=conversation,
        content=content,
        profile=profile,
        provider=provider,
        max_iterations=max_iterations,
    )
    return execute_run(run=run, provider=provider)


def start_run(
    *,
    conversation: Conversation,
    content: str | None = None,
    profile: Profile | None = None,
    provider: ChatProvider | None = None,
    max_iterations: int | None = None,
) -> Run:
    """Create a ``running`` run and persist the user message (if any), each committed.

    First recovers stale runs of this conversation; once the new run holds the
    conversation (one running run at most, a database rule), calls left open
    by an earlier run are answered as interrupted, so a crashed turn never
    blocks the next one. Raises :class:`ConversationBusy` when another run is
    running.
    """
    recover_runs(conversation=conversation)
    profile = _resolve_profile(conversation, profile, provider)
    cap = max_iterations or (profile.max_iterations if profile else app_settings().MAX_ITERATIONS)
    if Run.objects.filter(conversation=conversation, status=Run.Status.RUNNING).exists():
        raise ConversationBusy("another run is already running on this conversation")
    model_name = profile.language_model.model_id if profile else ""
    provider_name = (
        profile.language_model.provider.slug
        if profile
        else getattr(provider, "provider_name", type(provider).__name__)
    )
    try:
        with transaction.atomic():
            run = Run.objects.create(
                conversation=conversation,
                profile=profile,
                status=Run.Status.RUNNING,
                max_iterations=cap,
                provider=provider_name,
                model=model_name,
            )
    except IntegrityError:
        # The partial unique index on running runs: another request won the race.
        raise ConversationBusy("another run is already running on this conversation") from None
    try:
        # Only now, holding the conversation, can open calls be taken for leftovers.
        answer_open_calls(conversation=conversation, status=ToolCallRow.Status.INTERRUPTED)
        if content is not None:
            append_messages(
                conversation=conversation, messages=[ChatMessage.user(content)], run=run
            )
    except BaseException as exc:
        _finish_after_error(run, exc)
        raise
    return run


def execute_run(*, run: Run, provider: ChatProvider | None = None) -> Run:
    """Drive a ``running`` run to a terminal status (the loop itself).

    The run is claimed first (:func:`claim_run`), so it executes at most once
    whatever delivers it: a run that has already ended is returned as it is,
    one another process has claimed raises :class:`RunAlreadyClaimed`.

    A configuration problem found here (no usable provider, a key that does
    not resolve) ends the run ``failed`` with its code and is raised again.
    """
    if not claim_run(run=run):
        run.refresh_from_db()
        if run.status != Run.Status.RUNNING:
            return run
        raise RunAlreadyClaimed(f"run {run.pk} is already being executed by {run.worker}")
    profile = run.profile
    try:
        if provider is None:
            if profile is None:
                raise ConfigurationError("the run has no profile, so a provider must be given")
            provider = build_provider(profile)
        request = request_setup(profile=profile)
    except ConversationsError as exc:
        _finish_after_error(run, exc)
        raise
    with _Heartbeat(run.pk, interval=app_settings().RUN_LEASE_SECONDS / 3):
        return _drive(run, provider, profile, request)


def _drive(run: Run, provider: ChatProvider, profile: Profile | None, request: RequestSetup) -> Run:
    tools, specs, options = request.tools, request.specs, request.options
    # The run holds the conversation (one running run at most), so the history
    # is read once and then kept in step with what each round persists.
    history = history_for_provider(conversation=run.conversation, profile=profile)
    watch = _CancelWatch(run)
    try:
        while run.iterations < run.max_iterations:
            watch.raise_if_cancelled()
            response, latency_ms = _ask(provider, history, specs, options)
            checked = _persist_turn(run, response, latency_ms, counts_as_round=True, tools=tools)
            history.append(response.to_message())
            if not checked:
                return _finish(run, Run.Status.COMPLETED, final_content=response.content)
            outcomes = _run_calls(run, checked, tools, watch)
            history.extend(ChatMessage.tool_result(o.row.call_id, o.content) for o in outcomes)
        # Every round asked for tools: one more call, with none offered, for the answer.
        watch.raise_if_cancelled()
        final_options = dataclasses.replace(options, tool_choice=None, parallel_tool_calls=None)
        response, latency_ms = _ask(provider, history, [], final_options)
        checked = _persist_turn(run, response, latency_ms, counts_as_round=False, tools={})
        if checked:
            # Tools were not offered; answer each call so the history stays valid.
            _persist_outcomes(
                run,
                [
                    _Outcome(c, ToolCallRow.Status.REJECTED, tool_error_text(NOT_PERMITTED, c.name))
                    for c, _ in checked
                ],
            )
        return _finish(run, Run.Status.MAX_ITERATIONS, final_content=response.content)
    except ProviderError as exc:
        logger.warning("run %s: provider error %s", run.pk, exc.code)
        return _finish(run, Run.Status.FAILED, error_code=exc.code, error_message=exc.detail)
    except RunCancelled:
        return _finish(run, Run.Status.CANCELLED, error_code="run_cancelled")
    except BaseException as exc:
        # Not swallowed: record the failure so the conversation stays usable, then re-raise.
        _finish_after_error(run, exc)
        raise


def claim_run(*, run: Run) -> bool:
    """Take a ``running``, unclaimed run for this process (compare-and-set); ``True`` if taken.

    One ``UPDATE ... WHERE status = 'running' AND claimed_at IS NULL``: of any
    number of processes handed the same run (a redelivered task, a requeue,
    a cancellation ending a queued run) exactly one wins. The heartbeat is
    refreshed in the same statement, so a run that waited in a queue longer
    than the lease is not taken for dead the moment it starts.
    """
    now = timezone.now()
    taken = Run.objects.filter(
        pk=run.pk, status=Run.Status.RUNNING, claimed_at__isnull=True
    ).update(claimed_at=now, worker=worker_name(), heartbeat_at=now)
    if taken:
        run.claimed_at = run.heartbeat_at = now
        run.worker = worker_name()
    return bool(taken)


def end_unclaimed_run(*, run: Run, status: str, error_code: str, error_message: str = "") -> bool:
    """End a run that no process has claimed yet (it waits in a queue); ``True`` if ended.

    Used for a queued run that is cancelled, or that could not be enqueued.
    Claims it first, so a worker receiving it afterwards finds it ended.
    """
    if not claim_run(run=run):
        return False
    _finish(run, status, error_code=error_code, error_message=error_message)
    return True


def worker_name() -> str:
    """``host:pid`` of this process, recorded on the runs it claims."""
    return f"{socket.gethostname()}:{os.getpid()}"[:200]


@dataclass(frozen=True, slots=True)
class RequestSetup:
    """What a profile offers and asks for in every request of a run."""

    tools: dict[str, Tool]
    """The tools a run may execute, by name."""
    specs: list[ToolSpec]
    """Their specs, as offered to the model (empty: no ``tools`` key at all)."""
    options: CompletionOptions
    """Model, sampling and tool choice (``None`` when no tool is offered)."""


def request_setup(*, profile: Profile | None) -> RequestSetup:
    """Tools and options of a request for ``profile``: the loop and the dry-run export share it."""
    tools = available_tools(allowed=profile.allowed_tools if profile else None)
    specs = [tool.spec for tool in tools.values()]
    return RequestSetup(tools, specs, completion_options(profile, tools_offered=bool(specs)))


def history_for_provider(
    *, conversation: Conversation, profile: Profile | None
) -> list[ChatMessage]:
    """Exactly the messages a provider is sent: the profile's system prompt, then the history.

    The system prompt is configuration, not history: it is not stored in the
    conversation, so editing a profile changes what later turns are sent.
    """
    history = get_history(conversation=conversation)
    if profile is not None and profile.system_prompt:
        return [ChatMessage.system(profile.system_prompt), *history]
    return history


# Steps -------------------------------------------------------------------------------


def _resolve_profile(
    conversation: Conversation, profile: Profile | None, provider: ChatProvider | None
) -> Profile | None:
    profile = profile or conversation.profile or get_default_profile()
    if profile is None and provider is None:
        raise ConfigurationError(
            "no profile: give the conversation a profile, mark one as default, or pass a provider"
        )
    return profile


def _ask(
    provider: ChatProvider,
    history: Sequence[ChatMessage],
    specs: Sequence[ToolSpec],
    options: CompletionOptions,
) -> tuple[CompletionResponse, int]:
    started = time.monotonic()
    response = provider.complete(history, tools=specs, options=options)
    return response, int((time.monotonic() - started) * 1000)


def _persist_turn(
    run: Run,
    response: CompletionResponse,
    latency_ms: int,
    *,
    counts_as_round: bool,
    tools: dict[str, Tool],
) -> list[tuple[ToolCallRow, _Outcome | None]]:
    """Store the assistant turn, its calls and the run's counters in one transaction.

    Returns each call with its rejection (``None`` when it may run).

    Calls that will be executed are marked ``running`` in the same
    transaction, before any of them starts: after a crash they are answered as
    interrupted, never executed again (they may have had side effects).
    """
    usage = response.usage
    details = MessageDetails(
        model=response.model,
        finish_reason=response.finish_reason,
        usage=usage,
        latency_ms=latency_ms,
    )
    with transaction.atomic():
        (message,) = append_messages(
            conversation=run.conversation,
            messages=[response.to_message()],
            run=run,
            details=[details],
        )
        # append_messages hands the inserted calls over as the prefetched relation.
        rows = list(message.tool_calls.all()) if response.has_tool_calls else []
        checked = [(row, _check(row, tools)) for row in rows]
        runnable = [row for row, rejection in checked if rejection is None]
        if runnable:
            marked = timezone.now()
            ToolCallRow.objects.filter(pk__in=[r.pk for r in runnable]).update(
                status=ToolCallRow.Status.RUNNING, started_at=marked
            )
            for row in runnable:
                row.status, row.started_at = ToolCallRow.Status.RUNNING, marked
        _add_usage(run, usage, rounds=1 if counts_as_round else 0)
    return checked


def _add_usage(run: Run, usage: Usage, *, rounds: int) -> None:
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        iterations=F("iterations") + rounds,
        prompt_tokens=F("prompt_tokens") + usage.prompt_tokens,
        completion_tokens=F("completion_tokens") + usage.completion_tokens,
        total_tokens=F("total_tokens") + usage.total_tokens,
        cached_prompt_tokens=F("cached_prompt_tokens") + usage.cached_prompt_tokens,
        reasoning_tokens=F("reasoning_tokens") + usage.reasoning_tokens,
        heartbeat_at=now,
    )
    # Mirror the update in memory instead of re-reading the row.
    run.iterations += rounds
    run.prompt_tokens += usage.prompt_tokens
    run.completion_tokens += usage.completion_tokens
    run.total_tokens += usage.total_tokens
    run.cached_prompt_tokens += usage.cached_prompt_tokens
    run.reasoning_tokens += usage.reasoning_tokens
    run.heartbeat_at = now


def _check(row: ToolCallRow, tools: dict[str, Tool]) -> _Outcome | None:
    """The rejection for a call that must not run, or ``None`` when it may."""
    name = row.name
    tool = tools.get(name)
    if tool is None:
        template = NOT_PERMITTED if registry.get(name) is not None else UNKNOWN_TOOL
        return _Outcome(row, ToolCallRow.Status.REJECTED, tool_error_text(template, name))
    if row.raw_arguments is not None:
        return _Outcome(row, ToolCallRow.Status.REJECTED, tool_error_text(RAW_ARGUMENTS, name))
    violations = validate_arguments(tool, row.arguments)
    if violations:
        text = tool_error_text(INVALID_ARGUMENTS, name, violations="; ".join(violations))
        return _Outcome(row, ToolCallRow.Status.REJECTED, text)
    return None


def _run_calls(
    run: Run,
    checked: list[tuple[ToolCallRow, _Outcome | None]],
    tools: dict[str, Tool],
    watch: _CancelWatch,
) -> list[_Outcome]:
    """Execute the calls of one assistant turn in order and answer each; return the answers."""
    ordered: list[_Outcome] = []
    for row, rejection in checked:
        if rejection is not None:
            ordered.append(rejection)
        elif watch.cancelled():
            ordered.append(
                _Outcome(
                    row,
                    ToolCallRow.Status.CANCELLED,
                    answer_text_for(ToolCallRow.Status.CANCELLED, row.name),
                )
            )
        else:
            ordered.append(_execute(run, row, tools[row.name]))
    _persist_outcomes(run, ordered)
    for outcome in ordered:
        signals.tool_call_finished.send(
            sender=ToolCallRow, tool_call=outcome.row, run=run, result=outcome.content
        )
    if watch.seen:
        raise RunCancelled("the run was cancelled")
    return ordered


def _execute(run: Run, row: ToolCallRow, tool: Tool) -> _Outcome:
    signals.tool_call_started.send(sender=ToolCallRow, tool_call=row, run=run)
    started = timezone.now()
    try:
        result = execute(tool, row.arguments, context=_context(run, row))
    except Exception:
        # The text of the exception can hold secrets: the model gets a fixed
        # sentence, admins get the traceback on the call and in the log.
        logger.exception("tool %s failed (call %s, run %s)", row.name, row.call_id, run.pk)
        return _Outcome(
            row,
            ToolCallRow.Status.FAILED,
            tool_error_text(TOOL_FAILED, row.name),
            error=traceback.format_exc(),
            started_at=started,
            finished_at=timezone.now(),
        )
    content = truncate_result(result, app_settings().TOOL_RESULT_MAX_BYTES)
    return _Outcome(
        row, ToolCallRow.Status.SUCCEEDED, content, started_at=started, finished_at=timezone.now()
    )


def _context(run: Run, row: ToolCallRow) -> ToolContext:
    return ToolContext(conversation_id=run.conversation_id, run_id=run.pk, call_id=row.call_id)


def _persist_outcomes(run: Run, outcomes: list[_Outcome]) -> None:
    """Store every result and call status of a turn, and the heartbeat, in one transaction."""
    now = timezone.now()
    for outcome in outcomes:
        row = outcome.row
        row.status = outcome.status
        row.error = outcome.error
        row.started_at = outcome.started_at or row.started_at
        row.finished_at = outcome.finished_at or now
    with transaction.atomic():
        append_messages(
            conversation=run.conversation,
            messages=[ChatMessage.tool_result(o.row.call_id, o.content) for o in outcomes],
            run=run,
        )
        _update_call_states([o.row for o in outcomes])
        Run.objects.filter(pk=run.pk).update(heartbeat_at=now)


def _update_call_states(rows: list[ToolCallRow]) -> None:
    """Write status, error and times of ``rows`` in one ``UPDATE ... FROM (VALUES ...)``.

    ``bulk_update`` would build one ``CASE`` per field and row; with twenty
    calls that statement dominated a round. Both PostgreSQL and SQLite (3.33+)
    accept ``UPDATE ... FROM`` and name the columns of ``VALUES`` column1...
    """
    ops = connection.ops
    cast = "::timestamptz" if connection.vendor == "postgresql" else ""
    row_sql = f"(%s, %s, %s, %s{cast}, %s{cast})"
    params: list[Any] = []
    for row in rows:
        params += [
            row.pk,
            row.status,
            row.error,
            ops.adapt_datetimefield_value(row.started_at),
            ops.adapt_datetimefield_value(row.finished_at),
        ]
    table = connection.ops.quote_name(ToolCallRow._meta.db_table)
    # Only placeholders and our own table name go into the SQL text.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET status = v.column2, error = v.column3, "
            f"started_at = v.column4, finished_at = v.column5 "
            f"FROM (VALUES {', '.join([row_sql] * len(rows))}) AS v "
            f"WHERE {table}.id = v.column1",
            params,
        )


def answer_text_for(status: str, name: str) -> str:
    """The result a call gets when it never completed."""
    return ANSWER_TEXTS[status].format(name=name)


def _finish(
    run: Run,
    status: str,
    *,
    final_content: str = "",
    error_code: str = "",
    error_message: str = "",
) -> Run:
    """End the run; calls still open are answered so the history stays valid."""
    open_status = (
        ToolCallRow.Status.CANCELLED
        if status == Run.Status.CANCELLED
        else ToolCallRow.Status.INTERRUPTED
    )
    with transaction.atomic():
        answer_open_calls(conversation=run.conversation, status=open_status, run=run)
        run.status = status
        run.finished_at = timezone.now()
        run.final_content = final_content
        run.error_code = error_code
        run.error_message = error_message[:2000]
        run.save(
            update_fields=["status", "finished_at", "final_content", "error_code", "error_message"]
        )
    signals.run_finished.send(sender=Run, run=run)
    return run


def _finish_after_error(run: Run, exc: BaseException) -> None:
    """End the run ``failed`` after an unexpected error, never masking that error."""
    code = exc.code if isinstance(exc, ConversationsError) else "internal_error"
    detail = exc.detail if isinstance(exc, ConversationsError) else type(exc).__name__
    try:
        _finish(run, Run.Status.FAILED, error_code=code, error_message=detail)
    except Exception:
        # The database may be what failed; recovery will end the run later.
        logger.exception("run %s: could not record the failure", run.pk)


class _Heartbeat:
    """Refreshes the run's heartbeat from a background thread while the loop works.

    Between steps the loop refreshes it itself; this thread covers long
    provider calls and long tools, so recovery never takes a live run for a
    dead one. It beats every ``interval`` seconds (a third of the lease) and
    uses its own database connection.
    """

    def __init__(self, run_id: Any, *, interval: float) -> None:
        self.run_id = run_id
        self.interval = max(interval, 0.05)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Heartbeat:
        self._thread = threading.Thread(
            target=self._beat, name=f"heartbeat-{self.run_id}", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(self.interval):
                Run.objects.filter(pk=self.run_id, status=Run.Status.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
        finally:
            connection.close()


class _CancelWatch:
    """Checks ``Run.cancel_requested``: before every model call, and between tools
    at most every CANCEL_CHECK_INTERVAL seconds (quick tools do not each pay a query).
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.seen = False
        self._last: float | None = None

    def cancelled(self) -> bool:
        if self.seen:
            return True
        now = time.monotonic()
        if self._last is None or now - self._last >= CANCEL_CHECK_INTERVAL:
            self._last = now
            self.seen = Run.objects.filter(pk=self.run.pk, cancel_requested=True).exists()
        return self.seen

    def raise_if_cancelled(self) -> None:
        """At a round boundary: always ask the database (the round is about to cost more)."""
        self._last = None
        if self.cancelled():
            raise RunCancelled("the run was cancelled")
