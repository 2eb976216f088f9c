"""``manage.py purge_attachments``: delete attachments no message references, after a grace period."""

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from conversations.selectors import unreferenced_attachments
from conversations.services import purge_attachments


class Command(BaseCommand):
    help = (
        "Delete the attachments that no message references and that were uploaded more than "
        "--older-than hours ago (an upload is unreferenced until its message is posted), "
        "with their stored files."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=24.0,
            metavar="HOURS",
            help="Grace period in hours (default 24): younger orphans are kept.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Report what would be deleted; change nothing."
        )

    def handle(
        self, *args: Any, older_than: float = 24.0, dry_run: bool = False, **options: Any
    ) -> None:
        grace = timedelta(hours=max(0.0, older_than))
        if dry_run:
            count = unreferenced_attachments(created_before=timezone.now() - grace).count()
            self.stdout.write(
                self.style.SUCCESS(
                    f"{count} attachment(s) would be deleted (dry run: nothing changed)"
                )
            )
            return
        count = purge_attachments(older_than=grace)
        self.stdout.write(self.style.SUCCESS(f"{count} attachment(s) deleted"))
