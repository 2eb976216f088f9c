"""``manage.py recover_runs``: end runs whose process died, answering their open calls."""

from django.core.management.base import BaseCommand

from conversations.services.recovery import recover_runs


class Command(BaseCommand):
    help = (
        "Mark running runs whose heartbeat is older than the lease as interrupted and "
        "answer their open tool calls (never executing them again)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--lease",
            type=int,
            default=None,
            help="Seconds without heartbeat after which a run counts as dead "
            "(default: CONVERSATIONS['RUN_LEASE_SECONDS']).",
        )

    def handle(self, *args, lease=None, **options):
        runs = recover_runs(lease_seconds=lease)
        for run in runs:
            self.stdout.write(f"interrupted run {run.pk} (conversation {run.conversation_id})")
        self.stdout.write(self.style.SUCCESS(f"{len(runs)} run(s) recovered"))
