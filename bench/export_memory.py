"""Memory of the JSON Lines export (``GET /api/export/``): peak at two sizes, flat or not.

Usage, from the repository root::

    .venv/bin/python bench/export_memory.py [--database sqlite|postgres|both] [--sizes 20,200]
        [--turns 10]

On a throwaway database (``bench/databases.py``), two users get the two sizes
of conversations (default 20 and 200), each conversation ``--turns`` turns of
five messages (a question, two tool calls, their results, an answer), stored
through ``append_messages`` like any history. Each user's export is then read
whole through Django's request stack (``APIClient``, no network), its lines
dropped as they come, under ``tracemalloc``: the figure is the peak of Python
memory allocated during the export, above what was held before it. The
export is flat when the larger size's peak is within 1.5 x the smaller's
(the default sizes are 10 x apart, and the smaller fits in one of the old
200-conversation chunks while the larger needs one whole chunk).

It prints PASS/MISS and asserts nothing: the exit code is 0 whatever the
figures (see docs/performance.md).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from typing import Any

# bench/ is sys.path[0] when run as a script
from databases import add_database_options, describe_machine, refresh_statistics, run_bench

DEFAULT_SIZES = (20, 200)
FLAT = 1.5
"""The largest acceptable growth of the peak from the smaller size to the larger."""
ANSWER = "Light rain, 14 degrees, wind from the west at 20 km/h. " * 8
"""About 450 characters: the length of an ordinary answer."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser)
    parser.add_argument(
        "--sizes",
        default=",".join(str(size) for size in DEFAULT_SIZES),
        help="two comma-separated conversation counts (default 20,200)",
    )
    parser.add_argument("--turns", type=int, default=10, help="turns per conversation (10)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, not {args.sizes!r}")
    if len(sizes) != 2 or min(sizes) < 1:
        parser.error(f"--sizes: two positive conversation counts, not {args.sizes!r}")
    if args.turns < 1:
        parser.error(f"--turns must be a positive integer, not {args.turns}")
    passed = ["--sizes", args.sizes, "--turns", str(args.turns)]
    return run_bench(
        __file__, args, passed, label="export", work=lambda where: bench(where, sizes, args.turns)
    )


def bench(where: str, sizes: list[int], turns: int) -> None:
    sizes = sorted(sizes)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0, interactive=False)
    users = {}
    started = time.perf_counter()
    for size in sizes:
        user = get_user_model().objects.create_user(username=f"export{size}")
        for index in range(size):
            store_conversation(user, index, turns)
        users[size] = user
    stored = time.perf_counter() - started
    refresh_statistics()
    measure(
        users[sizes[0]]
    )  # once unmeasured: first-use costs (imports, URLconf) are not the export's
    figures = {size: measure(users[size]) for size in sizes}
    title = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite"
    print(f"== {title}: {where}")
    for line in describe_machine(connection.vendor):
        print(f"   {line}")
    print(f"   {turns} turns ({turns * 5} messages) per conversation; stored in {stored:.1f} s")
    print()
    header = f"{'conversations':>13}  {'export MB':>10}  {'peak MB':>8}"
    print(header)
    print("-" * len(header))
    for size in sizes:
        exported, peak = figures[size]
        print(f"{size:>13}  {exported / 1e6:>10.2f}  {peak / 1e6:>8.2f}")
    print()
    small, large = sizes
    growth = figures[large][1] / max(figures[small][1], 1)
    result = "PASS" if growth <= FLAT else "MISS"
    print(
        f"   export peak at {large:,} conversations = {growth:.2f} x at {small:,}"
        f" (flat: <= {FLAT}): {result}"
    )
    print()


def store_conversation(user: Any, index: int, turns: int) -> None:
    """One conversation of ``turns`` valid turns, appended at once."""
    from conversations.domain import ChatMessage, ToolCall
    from conversations.services.transcript.messages import append_messages, create_conversation

    conversation = create_conversation(owner=user, title=f"conversation {index}")
    messages = []
    for n in range(turns):
        made = [
            ToolCall(id=f"t{n}_{i}", name="get_weather", arguments={"city": f"City {n}.{i}"})
            for i in range(2)
        ]
        messages += [
            ChatMessage.user(f"Question {n}: what is the weather in two cities?"),
            ChatMessage.assistant_tool_calls(made),
            *(ChatMessage.tool_result(call.id, ANSWER) for call in made),
            ChatMessage.assistant(f"Answer {n}: {ANSWER}"),
        ]
    append_messages(conversation=conversation, messages=messages)


def measure(user: Any) -> tuple[int, int]:
    """Bytes exported, and the peak of Python memory allocated while exporting them."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    tracemalloc.start()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    response: Any = client.get("/api/export/")
    exported = 0
    for chunk in response.streaming_content:
        exported += len(chunk)  # each line is dropped once counted, as a socket would
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if response.status_code != 200:
        raise RuntimeError(f"the export answered {response.status_code}")
    return exported, peak - before


if __name__ == "__main__":
    sys.exit(main())
