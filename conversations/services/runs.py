"""Cancelling a run: a flag the tool loop reads at its step boundaries."""

from __future__ import annotations

from conversations.exceptions import RunNotRunning
from conversations.models import Run

from .tool_loop import end_unclaimed_run

__all__ = ["cancel_run"]


def cancel_run(*, run: Run) -> Run:
    """Ask a ``running`` run to stop; return it as it is now.

    Sets ``cancel_requested`` with one conditional ``UPDATE``, so a run that
    ends meanwhile is never flagged. The process executing the run sees the
    flag before its next provider call and between tools (a tool already
    running finishes), answers the calls still open as cancelled and ends the
    run ``cancelled``. A run still waiting in a queue (no process claimed it)
    ends ``cancelled`` at once. Raises :class:`RunNotRunning` when the run has
    already ended.
    """
    flagged = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(cancel_requested=True)
    if not flagged:
        run.refresh_from_db()
        raise RunNotRunning(f"the run has already ended ({run.status})")
    run.cancel_requested = True
    end_unclaimed_run(run=run, status=Run.Status.CANCELLED, error_code="run_cancelled")
    run.refresh_from_db()
    return run
