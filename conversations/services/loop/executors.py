"""Who executes a run: the request itself (``inline``) or a Celery worker (``celery``).

``CONVERSATIONS["EXECUTOR"]`` chooses. With ``inline`` the caller waits for
the whole tool loop. With ``celery`` the run is started here (the user message
is committed, the run is ``running`` and unclaimed) and its id is published
once the transaction commits; a worker claims it (``claim_run``) and executes
it. Delivery is at least once, the outcome exactly once: see the app's task
module and docs/adr/0004-runs-outside-the-request.md.

The run is published by the task's name (``conversations.publishing``), so
this module imports neither Celery nor the task module (which imports the
services): see docs/adr/0005-services-layout.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import timedelta
from functools import partial

from django.db import connections, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from conversations.conf import app_settings
from conversations.exceptions import ConfigurationError, ExecutorUnavailable
from conversations.models import (
    BUSY_RUN_STATUSES,
    Attachment,
    Conversation,
    OutputSchema,
    Run,
    ToolApproval,
)
from conversations.providers.base import ChatProvider
from conversations.selectors import get_default_profile

from ..configuration.providers import build_provider, close_provider
from ..usage.budgets import check_budgets
from .output import SchemaArgument, output_schema_for
from .runs import end_unclaimed_run, finish_run_after_error, resolve_profile, start_run
from .tool_loop import execute_run, run_tool_loop

__all__ = ["requeue_runs", "submit_message", "submit_run", "uses_workers"]

logger = logging.getLogger("conversations.executors")


def uses_workers() -> bool:
    """Whether runs are executed by Celery workers rather than in the request."""
    return app_settings().EXECUTOR == "celery"


def submit_message(
    *,
    conversation: Conversation,
    content: str | None,
    background: bool = False,
    output_schema: SchemaArgument | None = None,
    attachments: Sequence[Attachment] = (),
) -> Run:
    """Answer a user message with the configured executor; return its run.

    ``content=None`` stores no new message: the model answers the history as
    it stands (regenerating an answer in a branch).

    ``inline``: the finished run (this is :func:`run_tool_loop`); with
    ``background=True`` the run as started, executed by a thread of this
    process from the commit on (for a caller that follows its live events).
    ``celery``: the run as started, still ``running`` (or ``failed`` with code
    ``executor_unavailable`` when the broker refused the message). Either way
    a configuration error (no profile, a key reference that does not resolve)
    and a used-up blocking budget (``BudgetExceeded``) are raised before
    anything is stored, and a busy conversation raises ``ConversationBusy``.

    ``output_schema`` (a JSON Schema, a stored ``OutputSchema`` or the sha256
    of one the owner has used; default: the profile's) makes the run end in
    validated JSON, ``Run.output``; an unusable one raises
    ``InvalidArgumentError`` (``invalid_schema``) before anything is stored.

    ``attachments`` (rows the conversation's owner owns) are referenced by the
    user message, in order.
    """
    profile = conversation.profile or get_default_profile()
    check_budgets(user_id=conversation.owner_id, profile_id=profile.pk if profile else None)
    schema = output_schema_for(
        schema=output_schema, profile=profile, owner_id=conversation.owner_id
    )
    if not uses_workers():
        if background:
            return _start_in_background(
                conversation=conversation, content=content, schema=schema, attachments=attachments
            )
        return run_tool_loop(
            conversation=conversation,
            content=content,
            output_schema=schema,
            attachments=attachments,
        )
    if profile is not None:
        build_provider(profile)  # fail now, in the request, not later in a worker
    run = start_run(
        conversation=conversation,
        content=content,
        profile=profile,
        output_schema=schema,
        attachments=attachments,
    )
    submit_run(run)
    return run


def _start_in_background(
    *,
    conversation: Conversation,
    content: str | None,
    schema: OutputSchema | None,
    attachments: Sequence[Attachment],
) -> Run:
    """Start a run here (errors raise now) and execute it in a thread once committed."""
    profile = resolve_profile(conversation=conversation, profile=None, provider=None)
    provider = build_provider(profile)  # type: ignore[arg-type]  # resolved above
    try:
        run = start_run(
            conversation=conversation,
            content=content,
            profile=profile,
            output_schema=schema,
            attachments=attachments,
        )
    except BaseException:
        close_provider(provider)
        raise
    thread = threading.Thread(
        target=_execute_in_background,
        args=(run, provider),
        name=f"conversations-run-{run.pk}",
        daemon=True,
    )
    transaction.on_commit(thread.start)
    return run


def _execute_in_background(run: Run, provider: ChatProvider) -> None:
    """A background run's thread: the loop, then its provider and connections closed."""
    try:
        execute_run(run=run, provider=provider)
    except Exception as exc:
        logger.exception("run %s failed in its background thread", run.pk)
        # The loop records the failures it sees; one that came before it could
        # (or while it recorded another) would leave the run ``running`` until
        # its lease expired. Ending it is fenced: a run already ended stays as it is.
        finish_run_after_error(run=run, exc=exc)
    finally:
        close_provider(provider)
        connections.close_all()


def submit_run(run: Run) -> None:
    """Hand a started, unclaimed run to the configured executor.

    ``inline`` executes it now, in this process. ``celery`` publishes its id
    after the current transaction commits (at once outside of one), so a
    worker never looks for a run it cannot see yet.
    """
    if not uses_workers():
        execute_run(run=run)
        resume_parent(run)
        return
    transaction.on_commit(partial(_publish, run))


def resume_parent(run: Run) -> bool:
    """Hand on the run that waits for ``run``, an agent's run, now that it has ended; ``True`` if so.

    The parent resumes (``running``, unclaimed, handed to the executor) only
    when it waits, has no approval of its own pending and no other agent's
    run of it is still busy: one conditional ``UPDATE`` decides, so of two
    children ending at once only one resumes it. Call it after ``run`` was
    executed; with the ``inline`` executor the parent runs to its end here.
    """
    if run.parent_run_id is None:
        return False  # set when the run is created: no query for a run of its own
    run.refresh_from_db(fields=["status"])
    if run.status in BUSY_RUN_STATUSES:
        return False
    parent = Run.objects.filter(pk=run.parent_run_id)
    taken = (
        parent.filter(status=Run.Status.AWAITING_APPROVAL)
        .exclude(Exists(ToolApproval.objects.filter(run=OuterRef("pk"), decision="")))
        .exclude(
            Exists(Run.objects.filter(parent_run=OuterRef("pk"), status__in=BUSY_RUN_STATUSES))
        )
        .update(status=Run.Status.RUNNING, claimed_at=None, worker="", heartbeat_at=timezone.now())
    )
    if taken:
        logger.info(
            "run %s resumes: the agent run %s it waited for ended", run.parent_run_id, run.pk
        )
        submit_run(parent.get())
    return bool(taken)


def _publish(run: Run) -> None:
    try:
        # Imported here: only the celery executor needs it.
        from conversations.publishing import publish_run

        publish_run(run_id=str(run.pk))
    except Exception as exc:
        # The broker is down or Celery is not set up: end the run now rather
        # than leave it waiting for a worker that will never hear of it.
        logger.exception("run %s could not be enqueued", run.pk)
        end_unclaimed_run(
            run=run,
            status=Run.Status.FAILED,
            error_code=ExecutorUnavailable.code,
            error_message=f"the run could not be handed to a worker ({type(exc).__name__})",
        )


def requeue_runs(*, lease_seconds: int | None = None) -> list[Run]:
    """Publish again the runs that wait for a worker longer than the lease; return them.

    A run qualifies when it is ``running``, no process ever claimed it
    (``claimed_at`` is empty: nothing of it has executed, so executing it is
    safe) and its heartbeat is older than the lease. Its heartbeat is reset in
    the same conditional ``UPDATE`` that selects it, which gives it a new lease
    in the queue and makes a concurrent ``recover_runs`` leave it alone; a
    run that was claimed meanwhile is skipped. If the original message was not
    lost after all, the worker receiving the second copy finds the run claimed
    or ended and does nothing.
    """
    if not uses_workers():
        raise ConfigurationError("requeueing needs CONVERSATIONS['EXECUTOR'] = 'celery'")
    lease = lease_seconds if lease_seconds is not None else app_settings().RUN_LEASE_SECONDS
    now = timezone.now()
    cutoff = now - timedelta(seconds=lease)
    waiting = Run.objects.filter(
        status=Run.Status.RUNNING, claimed_at__isnull=True, heartbeat_at__lt=cutoff
    )
    requeued: list[Run] = []
    for run in waiting.select_related("conversation"):
        renewed = Run.objects.filter(
            pk=run.pk, status=Run.Status.RUNNING, claimed_at__isnull=True, heartbeat_at__lt=cutoff
        ).update(heartbeat_at=now)
        if renewed:
            run.heartbeat_at = now
            _publish(run)
            logger.warning("run %s re-enqueued (no worker took it within the lease)", run.pk)
            requeued.append(run)
    return requeued
