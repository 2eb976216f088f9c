"""``manage.py purge_conversations``: delete or redact conversations past their retention."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from conversations.services.history import MODES, RetentionReport, purge_conversations


def add_retention_options(parser: CommandParser) -> None:
    """``--dry-run`` and ``--mode``, shared with ``erase_user``."""
    parser.add_argument(
        "--dry-run", action="store_true", help="Report what would be done; change nothing."
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="delete",
        help="delete: remove whole conversations (default); redact: keep their shape, "
        "runs and usage but replace contents, tool arguments and results with a marker.",
    )


def write_report(command: BaseCommand, report: RetentionReport) -> None:
    """Print each conversation done and skipped, then a summary line."""
    verb = {"delete": "deleted", "redact": "redacted"}[report.mode]
    prefix = "would be " if report.dry_run else ""
    for pk in report.done:
        command.stdout.write(f"{prefix}{verb}: conversation {pk}")
    for pk in report.skipped:
        command.stdout.write(f"skipped (a run is running): conversation {pk}")
    summary = f"{len(report.done)} conversation(s) {prefix}{verb}, {len(report.skipped)} skipped"
    if report.dry_run:
        summary += " (dry run: nothing changed)"
    command.stdout.write(command.style.SUCCESS(summary))


class Command(BaseCommand):
    help = (
        "Delete (or redact) the conversations whose last message is older than their "
        "profile's retention_days. Profiles without retention keep their conversations "
        "forever; conversations with a running run are skipped and reported."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_retention_options(parser)

    def handle(
        self, *args: Any, dry_run: bool = False, mode: str = "delete", **options: Any
    ) -> None:
        write_report(self, purge_conversations(mode=mode, dry_run=dry_run))
