"""Reading a conversation's history: time per message at 10, 1,000 and 10,000 messages.

Usage, from the repository root::

    .venv/bin/python bench/history_reads.py [--database sqlite|postgres|both] [--sizes 10,1000,10000]

For each size, one conversation of that many messages is stored through
``append_messages`` (so the database's triggers check the grammar of every
row, as in production), in turns of five: a user message, an assistant
message with two tool calls, their two results, the assistant's answer. Then
two readers are timed, each over the whole conversation:

- ``history_for_provider``: what the tool loop sends a provider (read once
  per run);
- ``GET /api/conversations/{id}/messages/``: every page, following the
  ``next`` cursor, 100 messages per page (the largest page), through Django's
  full request stack (``APIClient``, no network).

µs per message is the median over the timed pieces of repeated reads (the
history: each read; the API: each page on its own), each divided by its
messages; ms per read is the median of whole reads. The sizes are read in
rotation (5 rotations, each reading every size about as many messages'
worth: 100 reads of 10 messages, 10 of 1,000, one of 10,000), so load from
other processes on the machine hits every size alike. A reader is flat when its time per message
does not grow with the history: the 10,000 message figure within 1.5 x the
1,000 message one (at 10 messages, fixed per-call costs dominate, so that
size only shows them). Queries are counted in one more, untimed read: per
read for the history, per page for the API.

It prints PASS/MISS and asserts nothing: the exit code is 0 whatever the
figures (see docs/performance.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

# bench/ is sys.path[0] when run as a script
from databases import (
    add_database_options,
    describe_machine,
    each_database,
    fresh_database,
    refresh_statistics,
)

DEFAULT_SIZES = (10, 1_000, 10_000)
TURN = 5
"""Messages per stored turn: user, assistant with two calls, two results, answer."""
PAGE_SIZE = 100
FLAT = 1.5
"""The largest acceptable growth of µs per message from 1,000 to 10,000 messages."""
ROTATIONS = 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser)
    parser.add_argument(
        "--sizes",
        default=",".join(str(size) for size in DEFAULT_SIZES),
        help="comma-separated message counts, each a multiple of 5 (default 10,1000,10000)",
    )
    args = parser.parse_args(argv)
    try:
        sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, not {args.sizes!r}")
    if any(size < TURN or size % TURN for size in sizes):
        parser.error(f"--sizes: each size must be a positive multiple of {TURN}, not {args.sizes}")
    if args.database == "both":
        passed = ["--sizes", args.sizes]
        if args.postgres_url:
            passed += ["--postgres-url", args.postgres_url]
        return each_database(__file__, passed)
    try:
        with fresh_database(args.database, args.postgres_url, label="history") as where:
            bench(where, sizes)
    except Exception as exc:  # a database that cannot be prepared: say so, and no figures
        print(f"== {args.database}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    # Informational only: a reader that is not flat is reported, never a failure.
    return 0


def bench(where: str, sizes: list[int]) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0, interactive=False)
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="bench")
    stored = []
    for size in sizes:
        started = time.perf_counter()
        stored.append((size, store_conversation(user, size), time.perf_counter() - started))
    refresh_statistics()
    readers = {"history_for_provider": read_history, "GET messages (all pages)": read_pages}
    conversations = {size: conversation for size, conversation, _ in stored}
    figures = {name: measure(reader, user, conversations) for name, reader in readers.items()}
    rows = [(size, name, *figures[name][size]) for size in sizes for name in readers]
    title = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite"
    print(f"== {title}: {where}")
    for line in describe_machine(connection.vendor):
        print(f"   {line}")
    print(
        f"   {ROTATIONS} rotations over the sizes; µs/message: median over reads (history) "
        f"or pages of {PAGE_SIZE} (API); ms/read: median of whole reads; "
        "queries per read or per page"
    )
    print()
    header = f"{'messages':>8}  {'reader':<26}  {'µs/message':>10}  {'ms/read':>9}  {'queries':>9}"
    print(header)
    print("-" * len(header))
    for size, name, per_message, total, queries in rows:
        print(f"{size:>8}  {name:<26}  {per_message:>10.1f}  {total * 1000:>9.2f}  {queries:>9}")
    print()
    stores = ", ".join(f"{size:,} in {seconds:.1f} s" for size, _, seconds in stored)
    print(f"   Stored (append_messages, every trigger): {stores}.")
    for name in readers:
        verdict(name, {size: per for size, reader, per, *_ in rows if reader == name})
    print()


def verdict(name: str, per_message: dict[int, float]) -> None:
    if 1_000 not in per_message or 10_000 not in per_message:
        print(f"   {name}: flat? needs the sizes 1000 and 10000")
        return
    growth = per_message[10_000] / per_message[1_000]
    result = "PASS" if growth <= FLAT else "MISS"
    print(f"   {name}: µs/message at 10,000 = {growth:.2f} x at 1,000 (flat: <= {FLAT}): {result}")


# Storing --------------------------------------------------------------------------------


def store_conversation(user: Any, size: int) -> Any:
    """A conversation of ``size`` messages in valid turns, appended 500 messages at a time."""
    from conversations.domain import ChatMessage, ToolCall
    from conversations.services.transcript.messages import append_messages, create_conversation

    conversation = create_conversation(owner=user, title=f"history of {size}")
    turns = []
    for n in range(size // TURN):
        made = [
            ToolCall(id=f"t{n}_{i}", name="get_weather", arguments={"city": f"City {n}.{i}"})
            for i in range(2)
        ]
        turns.append(
            [
                ChatMessage.user(f"Question {n}: what is the weather in two cities?"),
                ChatMessage.assistant_tool_calls(made),
                *(ChatMessage.tool_result(call.id, f"Light rain in {call.id}.") for call in made),
                ChatMessage.assistant(f"Answer {n}: light rain in both."),
            ]
        )
    batch = 500 // TURN
    for first in range(0, len(turns), batch):
        messages = [message for turn in turns[first : first + batch] for message in turn]
        append_messages(conversation=conversation, messages=messages)
    return conversation


# Reading --------------------------------------------------------------------------------


Timed = list[tuple[int, float]]
"""The pieces of one read: (messages, seconds) of each query-and-map or page."""


def read_history(user: Any, conversation: Any) -> Timed:
    """The history as the loop sends it: one piece."""
    from conversations.selectors import history_for_provider

    started = time.perf_counter()
    count = len(history_for_provider(conversation=conversation, profile=None))
    return [(count, time.perf_counter() - started)]


def read_pages(user: Any, conversation: Any) -> Timed:
    """Every page of the messages endpoint, each timed on its own."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    url: str | None = f"/api/conversations/{conversation.pk}/messages/?page_size={PAGE_SIZE}"
    pages = []
    while url:
        started = time.perf_counter()
        response = client.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url} answered {response.status_code}: {response.content!r}")
        body = response.json()
        pages.append((len(body["results"]), time.perf_counter() - started))
        url = body["next"]
    return pages


def measure(
    reader: Callable[[Any, Any], Timed], user: Any, conversations: dict[int, Any]
) -> dict[int, tuple[float, float, str]]:
    """Per size: µs per message and seconds per read (medians), and the queries of one read.

    µs per message is the median over the pieces (each page of the API on its
    own), so a burst of load on the machine skews one page, not a whole read.
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    queries: dict[int, str] = {}
    for size, conversation in conversations.items():
        with CaptureQueriesContext(connection) as captured:
            if sum(count for count, _ in reader(user, conversation)) != size:
                raise RuntimeError(f"{reader.__name__} did not read all {size} messages")
        pages = -(-size // PAGE_SIZE) if reader is read_pages else 1
        count = len(captured.captured_queries)
        queries[size] = f"{count}" if pages == 1 else f"{count / pages:.1f}/page"
    largest = max(conversations)
    per_message: dict[int, list[float]] = {size: [] for size in conversations}
    per_read: dict[int, list[float]] = {size: [] for size in conversations}
    for _ in range(ROTATIONS):
        for size, conversation in conversations.items():
            for _ in range(max(1, min(100, largest // size))):
                pieces = reader(user, conversation)
                per_message[size] += [seconds / count * 1e6 for count, seconds in pieces if count]
                per_read[size].append(sum(seconds for _, seconds in pieces))
    return {
        size: (
            statistics.median(per_message[size]),
            statistics.median(per_read[size]),
            queries[size],
        )
        for size in conversations
    }


if __name__ == "__main__":
    sys.exit(main())
