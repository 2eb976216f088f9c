"""Celery tasks: execute a queued run, and recover (or requeue) runs periodically.

Importing this module never requires Celery: without it the task objects are
``None`` (the system check ``conversations.E006`` reports an executor set to
``celery`` anyway), and the plain functions below stay usable.

The executor publishes runs by the task's name (``conversations.publishing``),
which is the name the task is registered under here.

Delivery is at least once (tasks are acknowledged late, so a message whose
worker died is delivered again); the outcome is exactly once, because
:func:`execute_queued_run` only ever executes a run it managed to claim:

- the run has ended (finished, cancelled, interrupted by recovery): nothing;
- the run is unclaimed: claim it and run the loop;
- another process claimed it (a redelivery): never resume the loop or run a
  tool again. If that process is dead (heartbeat older than the lease),
  recovery marks the run ``interrupted`` now; if it is alive, nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from conversations.exceptions import ConversationsError, RunAlreadyClaimed
from conversations.models import Run
from conversations.publishing import EXECUTE_RUN_TASK, RECOVER_RUNS_TASK
from conversations.services import execute_run, recover_runs
from conversations.services.approvals import expire_approvals
from conversations.services.loop import requeue_runs, resume_parent, uses_workers

__all__ = ["execute_queued_run", "execute_run_task", "recover_runs_task"]

logger = logging.getLogger("conversations.tasks")


def execute_queued_run(run_id: str) -> str:
    """Execute the run ``run_id`` if nobody has; return what happened (for logs and tests).

    One of ``"missing"`` (deleted with its conversation), ``"ended"`` (nothing
    to do), ``"executed"`` (the loop ran here; or, in a race, the run ended
    between loading it and claiming it, and nothing ran), ``"failed"`` (the
    loop raised one of the app's errors, which the run records),
    ``"recovered"`` (a redelivery found the claiming worker dead) or
    ``"claimed"`` (a redelivery while that worker is alive).
    """
    run = (
        Run.objects.select_related("conversation", "profile__language_model__provider")
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        return "missing"  # the conversation was deleted meanwhile
    if run.status != Run.Status.RUNNING:
        return "ended"
    try:
        execute_run(run=run)
    except RunAlreadyClaimed:
        if recover_runs(conversation=run.conversation):
            logger.warning("run %s: redelivered after its worker died; interrupted", run_id)
            return "recovered"
        return "claimed"
    except ConversationsError as exc:
        # Recorded on the run (failed, with this code); nothing to retry.
        logger.warning("run %s failed: %s", run_id, exc.code)
        resume_parent(run)
        return "failed"
    resume_parent(run)  # an agent's run that had waited: the run waiting for it goes on
    return "executed"


def recover_and_requeue(requeue: bool = True) -> dict[str, int]:
    """``recover_runs`` for every conversation, after requeueing lost messages (``requeue``).

    Expired tool call approvals are rejected first, which resumes their runs.
    """
    expired = expire_approvals()
    requeued = requeue_runs() if requeue and uses_workers() else []
    interrupted = recover_runs()
    return {"expired": len(expired), "requeued": len(requeued), "interrupted": len(interrupted)}


execute_run_task: Any = None
recover_runs_task: Any = None

try:
    from celery import shared_task
except ImportError:  # pragma: no cover - depends on the installation
    pass
else:
    execute_run_task = shared_task(
        name=EXECUTE_RUN_TASK,
        acks_late=True,
        # A worker process killed mid-task puts the message back; the claim makes
        # that harmless (see the module docstring).
        reject_on_worker_lost=True,
        ignore_result=True,
    )(execute_queued_run)
    recover_runs_task = shared_task(name=RECOVER_RUNS_TASK, ignore_result=True)(recover_and_requeue)
