"""Fencing: every write of a run happens only while this process still holds the run.

A process holds a run from the moment it claims it (``claim_run`` records
``claimed_at`` and ``worker``) until the run ends. Recovery may end a run
whose heartbeat expired while its process was merely paused; when that
process wakes up it must not write a single row: the conversation may
already belong to a newer run. So each write transaction of the loop begins
with :func:`hold_run`, one ``UPDATE`` conditioned on the run being
``running`` and claimed by this very claim. It locks the run row until the
transaction ends (recovery locks the same row first), and when it matches
nothing the transaction is abandoned with :class:`RunFencedOut`.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from conversations.exceptions import RunFencedOut
from conversations.models import Run

__all__ = ["fenced", "hold_run"]


def fenced(run: Run) -> QuerySet[Run]:
    """The run's row, fenced: it matches only while ``running`` under the claim ``run`` carries.

    For a write that ends or refreshes the run (``fenced(run).update(...)``
    matches nothing once the claim is lost); :func:`hold_run` is the one
    that opens a transaction of the loop.
    """
    return Run.objects.filter(
        pk=run.pk,
        status=Run.Status.RUNNING,
        claimed_at=run.claimed_at,
        worker=run.worker,
    )


def hold_run(run: Run) -> None:
    """Refresh the heartbeat if this process still holds ``run``; else :class:`RunFencedOut`.

    Call it first inside the transaction that writes for the run.
    """
    now = timezone.now()
    if not fenced(run).update(heartbeat_at=now):
        raise RunFencedOut(f"run {run.pk} is no longer held by this process")
    run.heartbeat_at = now
