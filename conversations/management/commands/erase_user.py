"""``manage.py erase_user USERNAME``: delete or redact everything a user owns."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.services.history import erase_user

from .purge_conversations import add_retention_options, write_report


class Command(BaseCommand):
    help = (
        "Delete (or redact) every conversation of a user, with all its messages, calls and "
        "runs, the user's calls over MCP and the attachments no message references any more. "
        "Conversations with a running run are skipped "
        "and reported: run it again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="The user's username.")
        add_retention_options(parser)

    def handle(
        self,
        *args: Any,
        username: str,
        dry_run: bool = False,
        mode: str = "delete",
        **options: Any,
    ) -> None:
        users = get_user_model()._default_manager
        try:
            user = users.get_by_natural_key(username)
        except users.model.DoesNotExist:
            raise CommandError(f"no user with username {username!r}") from None
        report = erase_user(user=user, mode=mode, dry_run=dry_run)
        write_report(self, report)
        verb = {"delete": "deleted", "redact": "redacted"}[mode]
        prefix = "would be " if dry_run else ""
        self.stdout.write(f"{report.mcp_calls} MCP call(s) {prefix}{verb}")
        self.stdout.write(f"{report.attachments} attachment(s) {prefix}deleted")
