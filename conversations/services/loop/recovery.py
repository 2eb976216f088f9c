"""Recovery: end runs whose process died, and answer calls left open.

A run refreshes ``heartbeat_at`` as it works. One whose heartbeat is older
than ``CONVERSATIONS["RUN_LEASE_SECONDS"]`` is taken for dead: it becomes
``interrupted`` and each of its calls still ``pending`` or ``running`` is
answered with the interrupted result (see ``tool_calls.answer_open_calls``)
and marked ``interrupted``. Such calls are never executed again: they may
already have had side effects.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from conversations import signals
from conversations.conf import app_settings
from conversations.models import Conversation, Run, ToolCall

from .tool_calls import answer_open_calls

__all__ = ["MIN_LEASE_SECONDS", "recover_runs"]

MIN_LEASE_SECONDS = 30
"""The shortest lease ``manage.py recover_runs --lease`` accepts: a shorter one
would end live runs whose process merely paused (a slow provider call, a GC
pause, a suspended container). Such a process is fenced out, but its run
still ends ``interrupted`` for nothing."""

logger = logging.getLogger("conversations.recovery")


def recover_runs(
    *,
    conversation: Conversation | None = None,
    lease_seconds: int | None = None,
    now: datetime | None = None,
) -> list[Run]:
    """Mark runs with an expired heartbeat ``interrupted``; return them.

    Safe to call from several processes at once: each run is locked and
    re-checked before it is changed, and a live run is never touched.
    """
    lease = lease_seconds if lease_seconds is not None else app_settings().RUN_LEASE_SECONDS
    cutoff = (now or timezone.now()) - timedelta(seconds=lease)
    stale = Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=cutoff)
    if conversation is not None:
        stale = stale.filter(conversation=conversation)
    recovered: list[Run] = []
    for run_id in list(stale.values_list("pk", flat=True)):
        with transaction.atomic():
            run = (
                Run.objects.select_for_update(of=("self",))
                .select_related("conversation")
                .filter(pk=run_id, status=Run.Status.RUNNING, heartbeat_at__lt=cutoff)
                .first()
            )
            if run is None:
                continue  # finished or refreshed meanwhile
            answer_open_calls(
                conversation=run.conversation, status=ToolCall.Status.INTERRUPTED, run=run
            )
            run.status = Run.Status.INTERRUPTED
            run.finished_at = timezone.now()
            run.error_code = "interrupted"
            run.error_message = "the process running this run stopped (heartbeat expired)"
            run.save(update_fields=["status", "finished_at", "error_code", "error_message"])
        logger.warning("run %s interrupted by recovery (heartbeat expired)", run.pk)
        signals.run_finished.send(sender=Run, run=run)
        recovered.append(run)
    return recovered
