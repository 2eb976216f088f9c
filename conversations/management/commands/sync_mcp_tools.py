"""``manage.py sync_mcp_tools [SLUG ...]``: list MCP servers' tools into the database."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.exceptions import MCPServerError
from conversations.mcp import SDK_MISSING_HINT, sdk_installed
from conversations.models import MCPServer


class Command(BaseCommand):
    help = (
        "Connect to each enabled MCP server (or those named) and store the tools it lists. "
        "New tools of untrusted servers start disabled; a tool whose description or input "
        "schema changed is disabled until an admin enables it again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slugs", nargs="*", help="Slugs of the servers (default: all enabled).")

    def handle(self, *args: Any, slugs: list[str], **options: Any) -> None:
        if not sdk_installed():
            raise CommandError(SDK_MISSING_HINT)
        from conversations.mcp.sync import sync_server_tools

        if slugs:
            servers = list(MCPServer.objects.filter(slug__in=slugs))
            unknown = sorted(set(slugs) - {s.slug for s in servers})
            if unknown:
                raise CommandError(f"No MCP server with slug: {', '.join(unknown)}.")
        else:
            servers = list(MCPServer.objects.filter(enabled=True))
        failed: list[str] = []
        for server in servers:
            try:
                report = sync_server_tools(server=server)
            except MCPServerError as exc:
                failed.append(server.slug)
                self.stderr.write(exc.detail)
                continue
            self.stdout.write(
                f"{report.server}: {len(report.added)} added, {len(report.changed)} changed "
                f"(disabled), {len(report.removed)} removed, {report.unchanged} unchanged."
            )
            for name in report.changed:
                self.stdout.write(f"  {name}: schema changed, disabled until enabled again.")
        if failed:
            raise CommandError(f"Could not sync: {', '.join(failed)}.")
