"""The run lifecycle: start, claim, heartbeat, cancel and finish a run.

A run is ``running`` from :func:`start_run` until exactly one of
:func:`finish_run` (the loop, a cancellation of a queued run) or recovery
ends it. Whoever ends it answers the calls still open first, so the stored
history stays one every provider accepts.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from django.db import IntegrityError, transaction
from django.db.models import Exists
from django.utils import timezone

from conversations import signals
from conversations.conf import app_settings
from conversations.domain import ChatMessage
from conversations.exceptions import (
    ApprovalPending,
    ConfigurationError,
    ConversationBusy,
    ConversationsError,
    RunCancelled,
    RunFencedOut,
    RunNotRunning,
)
from conversations.models import (
    BUSY_RUN_STATUSES,
    Attachment,
    Conversation,
    Profile,
    Run,
    ToolApproval,
)
from conversations.models import ToolCall as ToolCallRow
from conversations.models.output import OutputSchema, output_column
from conversations.providers.base import ChatProvider
from conversations.selectors import (
    TranscriptTail,
    attachment_part,
    descendant_runs,
    get_default_profile,
    history_and_tail,
    transcript_tail,
)

from ..transcript.messages import append_after
from .fencing import fenced
from .hot_path import open_turn
from .recovery import recover_runs
from .run_limits import reserve_run_capacity
from .started import StartedTurn
from .tool_calls import answer_open_calls

__all__ = [
    "CANCEL_CHECK_INTERVAL",
    "CancelWatch",
    "StartedTurn",
    "begin_turn",
    "cancel_run",
    "claim_run",
    "end_unclaimed_run",
    "finish_run",
    "finish_run_after_error",
    "reload_run",
    "resolve_profile",
    "start_run",
    "wait_for_agents",
    "worker_name",
]

if TYPE_CHECKING:
    from conversations.domain.output import OutputCheck

logger = logging.getLogger("conversations.tool_loop")

CANCEL_CHECK_INTERVAL = 0.5
"""Seconds between cancellation checks while tools run (keeps queries per round flat)."""


def resolve_profile(
    *, conversation: Conversation, profile: Profile | None, provider: ChatProvider | None
) -> Profile | None:
    """The profile a run uses: the one given, the conversation's, else the default one.

    Raises :class:`ConfigurationError` when there is none and no provider is given.
    """
    profile = profile or conversation.profile or get_default_profile()
    if profile is None and provider is None:
        raise ConfigurationError(
            "no profile: give the conversation a profile, mark one as default, or pass a provider"
        )
    return profile


def start_run(
    *,
    conversation: Conversation,
    content: str | None = None,
    profile: Profile | None = None,
    provider: ChatProvider | None = None,
    max_iterations: int | None = None,
    output_schema: OutputSchema | None = None,
    attachments: Sequence[Attachment] = (),
) -> Run:
    """Create a ``running``, unclaimed run and persist the user message (if any), in one commit.

    A run of this conversation whose heartbeat expired is recovered first;
    calls left open by an earlier run are answered as interrupted, so a
    crashed turn never blocks the next one. Raises :class:`ConversationBusy`
    when another run is running, :class:`ApprovalPending` when one waits for
    an approval, :class:`TooManyRuns` when the conversation's owner already
    has ``MAX_RUNS_PER_USER`` runs running.
    """
    profile = resolve_profile(conversation=conversation, profile=profile, provider=provider)
    return begin_turn(
        conversation=conversation,
        content=content,
        profile=profile,
        provider=provider,
        max_iterations=max_iterations,
        claim=False,
        output_schema=output_schema,
        attachments=attachments,
    ).run


def begin_turn(
    *,
    conversation: Conversation,
    content: str | None,
    profile: Profile | None,
    provider: ChatProvider | None,
    max_iterations: int | None,
    claim: bool,
    output_schema: OutputSchema | None = None,
    parent_run: Run | None = None,
    attachments: Sequence[Attachment] = (),
) -> StartedTurn:
    """:func:`start_run` with ``profile`` already resolved; ``claim=True``: this process executes it.

    One transaction inserts the run (claimed by this process when ``claim``),
    bumps the conversation, reads its history (only its end when not
    ``claim``: another process will execute the run and read the history
    then) and appends the user message.
    The busy state is read only when the insert is refused by the rule of one
    busy run per conversation: then stale runs are recovered and the insert is
    tried once more, else :class:`ApprovalPending` or :class:`ConversationBusy`
    is raised. Nothing is stored when anything fails. ``parent_run``: the run
    whose agent call starts this one (see ``agents``).
    """
    cap = max_iterations or (profile.max_iterations if profile else app_settings().MAX_ITERATIONS)
    provider_name = (
        profile.language_model.provider.slug
        if profile
        else getattr(provider, "provider_name", type(provider).__name__)
    )
    fields = {
        "conversation": conversation,
        "profile": profile,
        "status": Run.Status.RUNNING,
        "max_iterations": cap,
        "provider": provider_name,
        "model": profile.language_model.model_id if profile else "",
        "output_schema": output_schema or getattr(profile, "output_schema", None),
    }
    if parent_run is not None:
        fields.update(parent_run=parent_run, root_run_id=parent_run.root_run_id or parent_run.pk)

    # Checked before any write; a database rule checks the attachments' owner.
    parts = [attachment_part(attachment) for attachment in attachments]
    message = None if content is None else ChatMessage.user(content, parts=parts)

    def attempt() -> StartedTurn:
        if claim:
            now = timezone.now()
            fields.update(claimed_at=now, heartbeat_at=now, worker=worker_name())
        return _open_turn(
            conversation, fields, message=message, profile=profile, read_history=claim
        )

    try:
        return attempt()
    except _Taken:
        # A run whose process died holds the conversation until it is recovered.
        if not recover_runs(conversation=conversation):
            _refuse(conversation)
    try:
        return attempt()
    except _Taken:
        _refuse(conversation)


class _Taken(Exception):
    """The run's insert was refused: another run of the conversation is busy."""


def _open_turn(
    conversation: Conversation,
    fields: dict[str, Any],
    *,
    message: ChatMessage | None,
    profile: Profile | None,
    read_history: bool,
) -> StartedTurn:
    with transaction.atomic():
        # Before the insert, under a per-user lock: two requests never both take the last place.
        reserve_run_capacity(user_id=conversation.owner_id)
        try:
            run = Run.objects.create(**fields)
        except IntegrityError:
            # The partial unique index on busy runs (another request may have won the race).
            raise _Taken from None
        try:
            opened = open_turn(run)
        except Conversation.DoesNotExist:
            # Deleted meanwhile (the delete locked it first): the conversation is not free.
            raise ConversationBusy("the conversation is being deleted") from None
        history, tail = _read(conversation, profile, read_history)
        if tail.open_calls:
            # Left open by an earlier run: only now, holding the conversation, can they be taken.
            answer_open_calls(conversation=conversation, status=ToolCallRow.Status.INTERRUPTED)
            history, tail = _read(conversation, profile, read_history)
        if message is not None:
            append_after(
                conversation=conversation, messages=[message], tail=tail, run=run, touch=False
            )
            if history is not None:
                history.append(message)
    return StartedTurn(
        run, history, tail, opened.budgets_apply, opened.tool_settings, opened.prices
    )


def _read(
    conversation: Conversation, profile: Profile | None, history: bool
) -> tuple[list[ChatMessage] | None, TranscriptTail]:
    """The history and the tail, or (``history=False``) only the tail."""
    if history:
        return history_and_tail(conversation=conversation, profile=profile, bounded=True)
    return None, transcript_tail(conversation=conversation)


def _refuse(conversation: Conversation) -> NoReturn:
    """Raise why the conversation is busy (one query)."""
    busy = Run.objects.filter(conversation=conversation, status__in=BUSY_RUN_STATUSES)
    if busy.filter(status=Run.Status.AWAITING_APPROVAL).exists():
        raise ApprovalPending("a run of this conversation waits for a tool call approval")
    raise ConversationBusy("another run is already running on this conversation")


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
    finish_run(run=run, status=status, error_code=error_code, error_message=error_message)
    return True


def worker_name() -> str:
    """``host:pid`` of this process, recorded on the runs it claims."""
    return f"{socket.gethostname()}:{os.getpid()}"[:200]


def cancel_run(*, run: Run) -> Run:
    """Ask a ``running`` run to stop; return it as it is now.

    Sets ``cancel_requested`` with one conditional ``UPDATE``, so a run that
    ends meanwhile is never flagged. The process executing the run sees the
    flag before its next provider call and between tools (a tool already
    running finishes; a turn stored after the flag was set starts none of its
    calls), answers the calls still open as cancelled and ends the
    run ``cancelled``. A run still waiting in a queue (no process claimed it)
    ends ``cancelled`` at once, and so does a run waiting for approvals: its
    pending approvals are rejected and its held calls answered cancelled.
    The runs its agent calls started (``Run.parent_run``, at any depth) are
    cancelled with it. Raises :class:`RunNotRunning` when the run has already ended.
    """
    if _cancel_waiting_run(run=run):
        _cancel_children(run)
        run.refresh_from_db()
        return run
    flagged = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(cancel_requested=True)
    if not flagged:
        run.refresh_from_db()
        raise RunNotRunning(f"the run has already ended ({run.status})")
    run.cancel_requested = True
    _cancel_children(run)
    end_unclaimed_run(run=run, status=Run.Status.CANCELLED, error_code="run_cancelled")
    run.refresh_from_db()
    return run


def wait_for_agents(*, run: Run) -> bool:
    """Let ``run`` wait, ``awaiting_approval`` and unclaimed, while a run of its agents waits.

    ``True``: it waits, and resumes when the last of its agents' runs ends
    (``executors.resume_parent``). ``False``: none waits any more (one was
    decided meanwhile), the run is still held here and goes on. Raises
    :class:`RunFencedOut` when this process no longer holds the run.
    """
    now = timezone.now()
    busy = Run.objects.filter(parent_run=run.pk, status__in=BUSY_RUN_STATUSES)
    waiting = (
        fenced(run)
        .filter(Exists(busy))
        .update(status=Run.Status.AWAITING_APPROVAL, claimed_at=None, worker="", heartbeat_at=now)
    )
    if waiting:
        run.status, run.claimed_at, run.worker = Run.Status.AWAITING_APPROVAL, None, ""
        logger.info("run %s waits for the approvals of its agents", run.pk)
        return True
    if not fenced(run).exists():
        raise RunFencedOut(f"run {run.pk} is no longer held by this process")
    return False


def _cancel_children(run: Run) -> None:
    """Flag every busy run below ``run``; end those that wait for approvals (one query if none)."""
    below = descendant_runs(run=run).filter(status__in=BUSY_RUN_STATUSES)
    below.filter(status=Run.Status.RUNNING).update(cancel_requested=True)
    for waiting in below.filter(status=Run.Status.AWAITING_APPROVAL):
        _cancel_waiting_run(run=waiting)


def _cancel_waiting_run(*, run: Run) -> bool:
    """End a run that waits for approvals ``cancelled``; ``True`` if this call ended it.

    Takes the run from ``awaiting_approval`` with one conditional ``UPDATE`` (so
    a decision resuming it meanwhile and this cancellation never both win).
    """
    now = timezone.now()
    with transaction.atomic():
        taken = Run.objects.filter(pk=run.pk, status=Run.Status.AWAITING_APPROVAL).update(
            status=Run.Status.RUNNING,
            claimed_at=now,
            worker=worker_name(),
            heartbeat_at=now,
            cancel_requested=True,
        )
        if not taken:
            return False
        pending = list(ToolApproval.objects.filter(run=run, decision=""))
        ToolApproval.objects.filter(pk__in=[a.pk for a in pending]).update(
            decision=ToolApproval.Decision.REJECTED, decided_at=now, reason="run cancelled"
        )
    run.refresh_from_db()
    finish_run(run=run, status=Run.Status.CANCELLED, error_code="run_cancelled")
    for approval in pending:
        approval.refresh_from_db()
        signals.approval_decided.send(sender=ToolApproval, approval=approval, run=run)
    return True


def finish_run(
    *,
    run: Run,
    status: str,
    final_content: str = "",
    error_code: str = "",
    error_message: str = "",
    answered: bool = False,
    output: OutputCheck | None = None,
) -> Run:
    """End the run (and store ``output``, its validated answer); open calls are answered.

    Fenced: when this process no longer holds the run (recovery ended it
    meanwhile), nothing is written, and the run is returned as it is stored.
    ``answered=True``: the caller holds the conversation and knows every call
    of it is answered, so none is looked for.
    """
    open_status = (
        ToolCallRow.Status.CANCELLED
        if status == Run.Status.CANCELLED
        else ToolCallRow.Status.INTERRUPTED
    )
    finished_at = timezone.now()
    with transaction.atomic():
        # The run row first (as recovery locks it), then the conversation.
        ended = fenced(run).update(
            status=status,
            finished_at=finished_at,
            final_content=final_content,
            error_code=error_code,
            error_message=error_message[:2000],
            **({"output": output_column(output.value)} if output and output.valid else {}),
        )
        if ended and not answered:
            answer_open_calls(conversation=run.conversation, status=open_status, run=run)
    if not ended:
        logger.warning("run %s: fenced out, not ended as %s (ended meanwhile)", run.pk, status)
        return reload_run(run)
    run.status, run.finished_at, run.final_content = status, finished_at, final_content
    run.error_code, run.error_message = error_code, error_message[:2000]
    run.output = output.value if output and output.valid else run.output
    signals.run_finished.send(sender=Run, run=run)
    return run


def reload_run(run: Run) -> Run:
    """``run`` as stored now; as it is when it no longer exists (its conversation was deleted)."""
    try:
        run.refresh_from_db()
    except Run.DoesNotExist:
        logger.warning("run %s: deleted with its conversation while it was executing", run.pk)
    return run


def finish_run_after_error(*, run: Run, exc: BaseException) -> None:
    """End the run ``failed`` after an unexpected error, never masking that error."""
    code = exc.code if isinstance(exc, ConversationsError) else "internal_error"
    detail = exc.detail if isinstance(exc, ConversationsError) else type(exc).__name__
    try:
        finish_run(run=run, status=Run.Status.FAILED, error_code=code, error_message=detail)
    except Exception:
        # The database may be what failed; recovery will end the run later.
        logger.exception("run %s: could not record the failure", run.pk)


class CancelWatch:
    """Checks ``Run.cancel_requested``: before every model call, and between tools
    at most every CANCEL_CHECK_INTERVAL seconds (quick tools do not each pay a query).
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.seen = False
        self._last: float | None = None
        self._fresh = False

    def read(self, cancel_requested: bool, *, fresh: bool = True) -> None:
        """The flag as a statement of the loop just read it: the next round need not ask.

        ``fresh=False`` when code may run in between that could ask for a
        cancellation (signal receivers): then the next round asks anyway.
        """
        self.seen = self.seen or cancel_requested
        self._fresh = fresh

    def cancelled(self) -> bool:
        """Whether a cancellation was requested (asks the database at most every interval)."""
        if self.seen:
            return True
        now = time.monotonic()
        if self._last is None or now - self._last >= CANCEL_CHECK_INTERVAL:
            self._last = now
            self.seen = Run.objects.filter(pk=self.run.pk, cancel_requested=True).exists()
        return self.seen

    def raise_if_cancelled(self) -> None:
        """At a round boundary: ask the database unless the flag was just read (:meth:`read`)."""
        if self._fresh:
            self._fresh = False
            self._last = time.monotonic()
        else:
            self._last = None
        if self.cancelled():
            raise RunCancelled("the run was cancelled")
