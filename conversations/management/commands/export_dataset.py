"""``manage.py export_dataset``: rated conversations as a fine-tuning JSON Lines file."""

from __future__ import annotations

import datetime as dt
import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from conversations.exceptions import InvalidArgumentError
from conversations.services.feedback import (
    DATASET_FORMATS,
    RATINGS,
    DatasetQuery,
    dataset_conversations,
    dataset_lines,
)

BAR_WIDTH = 30


def _day(value: str) -> dt.datetime:
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"not a date (YYYY-MM-DD): {value!r}") from None
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)


class ProgressBar:
    """``[#####.....] 12/40 conversations`` on one line of ``out``, redrawn in place."""

    def __init__(self, total: int, out: OutputWrapper) -> None:
        self.total = total
        self.done = 0
        self.out = out

    def __call__(self) -> None:
        self.done += 1
        self.draw()

    def draw(self) -> None:
        filled = BAR_WIDTH * self.done // self.total if self.total else BAR_WIDTH
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        self.out.write(f"\r[{bar}] {self.done}/{self.total} conversations", ending="")
        self.out.flush()


class Command(BaseCommand):
    help = (
        "Write conversations as a dataset, one JSON object per line: openai-chat (chat "
        "fine-tuning), openai-dpo (preference pairs from sibling branches) or jsonl (the "
        "app's own shape with its feedback). Redacted conversations never appear."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("output", help="The file to write (- for standard output).")
        parser.add_argument("--format", choices=DATASET_FORMATS, default="openai-chat")
        parser.add_argument("--rated", choices=RATINGS)
        parser.add_argument("--profile", help="Only this profile's conversations (slug).")
        parser.add_argument("--from", dest="date_from", help="Created on or after, YYYY-MM-DD.")
        parser.add_argument("--to", dest="date_to", help="Created on or before, YYYY-MM-DD.")
        parser.add_argument("--user", help="Only this username's conversations (default: all).")
        parser.add_argument(
            "--evaluations", action="store_true", help="Include evaluation conversations."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = None
        if options["user"]:
            owner = get_user_model().objects.filter(username=options["user"]).first()
            if owner is None:
                raise CommandError(f"no user named {options['user']!r}")
        to = options["date_to"]
        query = DatasetQuery(
            owner=owner,
            rated=options["rated"],
            profile=options["profile"],
            date_from=_day(options["date_from"]) if options["date_from"] else None,
            date_to=_day(to) + dt.timedelta(days=1) if to else None,
            evaluations=options["evaluations"],
        )
        try:
            total = dataset_conversations(query=query).count()
        except InvalidArgumentError as exc:
            raise CommandError(str(exc)) from None
        bar = ProgressBar(total, self.stderr)
        lines = dataset_lines(query=query, format=options["format"], progress=bar)
        written = 0
        target = options["output"]
        with ExitStack() as stack:
            handle: Any = (
                self.stdout
                if target == "-"
                else stack.enter_context(Path(target).open("w", encoding="utf-8"))
            )
            bar.draw()
            for line in lines:
                text = json.dumps(line, ensure_ascii=False, separators=(",", ":"))
                if target == "-":
                    handle.write(text)
                else:
                    handle.write(text + "\n")
                written += 1
        self.stderr.write("")
        self.stderr.write(f"{written} line(s) of {options['format']} from {total} conversation(s).")
