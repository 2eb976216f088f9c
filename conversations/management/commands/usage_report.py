"""``manage.py usage_report``: tokens and cost of model calls, grouped, as a table."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.conf import app_settings
from conversations.selectors.usage import GROUPINGS, UsageRow, usage_calls, usage_totals

COLUMNS = ("calls", "failed", "unpriced", "prompt", "cached", "completion", "reasoning", "cost")


def _day(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"not a date (YYYY-MM-DD): {value!r}") from None


def _cells(row: UsageRow) -> list[str]:
    cost = "-" if row.cost is None else f"{row.cost:.6f}"
    counts = (
        row.calls,
        row.failed_calls,
        row.unpriced_calls,
        row.prompt_tokens,
        row.cached_prompt_tokens,
        row.completion_tokens,
        row.reasoning_tokens,
    )
    return [*(str(n) for n in counts), cost]


class Command(BaseCommand):
    help = (
        "Print the tokens and cost of the model calls made between two days (UTC, "
        "inclusive), grouped by day, model, profile or user. Calls without a known price "
        "are counted as unpriced, never as costing 0."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", required=True, help="First day, YYYY-MM-DD.")
        parser.add_argument("--until", help="Last day, YYYY-MM-DD (default: today).")
        parser.add_argument("--group-by", choices=GROUPINGS, default="day")
        parser.add_argument("--user", help="Only this username's calls (default: everyone's).")

    def handle(self, *args: Any, **options: Any) -> None:
        since = _day(options["since"])
        until = _day(options["until"]) if options["until"] else dt.datetime.now(dt.UTC).date()
        if since > until:
            raise CommandError("--since must not be after --until")
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"no user named {options['user']!r}")
        calls = usage_calls(user=user, since=since, until=until)
        group_by = options["group_by"]
        total, groups = usage_totals(calls=calls, group_by=group_by)
        currency = app_settings().CURRENCY
        self.stdout.write(f"Usage {since} .. {until} by {group_by} (cost in {currency})")
        table = [[group_by, *COLUMNS]]
        table += [[row.key or "(none)", *_cells(row)] for row in groups]
        table.append(["total", *_cells(total)])
        widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
        for line in table:
            cells = [line[0].ljust(widths[0])]
            cells += [cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)]
            self.stdout.write("  ".join(cells).rstrip())
