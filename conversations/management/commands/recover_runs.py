"""``manage.py recover_runs``: end runs whose process died, answering their open calls."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.services.approvals import expire_approvals
from conversations.services.loop import MIN_LEASE_SECONDS, recover_runs


class Command(BaseCommand):
    help = (
        "Mark running runs whose heartbeat is older than the lease as interrupted and "
        "answer their open tool calls (never executing them again). With --requeue, "
        "runs that no worker ever took (their message was lost) are published again "
        "instead. Tool call approvals past their expiry are rejected first "
        "(reason 'approval timed out'), which resumes their runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--lease",
            type=int,
            default=None,
            help="Seconds without heartbeat after which a run counts as dead "
            f"(default: CONVERSATIONS['RUN_LEASE_SECONDS']; at least {MIN_LEASE_SECONDS}).",
        )
        parser.add_argument(
            "--requeue",
            action="store_true",
            help="Publish again the runs still waiting for a worker after the lease "
            "(never claimed by any process, so nothing of them ran); needs the celery "
            "executor. Runs a worker had taken are interrupted as usual.",
        )

    def handle(
        self, *args: Any, lease: int | None = None, requeue: bool = False, **options: Any
    ) -> None:
        if lease is not None and lease < MIN_LEASE_SECONDS:
            raise CommandError(
                f"--lease must be at least {MIN_LEASE_SECONDS} seconds (got {lease}): a shorter "
                "lease would end runs whose process is alive but paused"
            )
        for decision in expire_approvals():
            self.stdout.write(
                f"rejected expired approval of tool call {decision.approval.tool_call_id} "
                f"(run {decision.run.pk}, now {decision.run.status})"
            )
        if requeue:
            from conversations.services.loop import requeue_runs, uses_workers

            if not uses_workers():
                raise CommandError("--requeue needs CONVERSATIONS['EXECUTOR'] = 'celery'")
            for run in requeue_runs(lease_seconds=lease):
                self.stdout.write(f"requeued run {run.pk} (conversation {run.conversation_id})")
        runs = recover_runs(lease_seconds=lease)
        for run in runs:
            self.stdout.write(f"interrupted run {run.pk} (conversation {run.conversation_id})")
        self.stdout.write(self.style.SUCCESS(f"{len(runs)} run(s) recovered"))
