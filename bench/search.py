"""Message search on PostgreSQL: latency of the API's page query over a large history.

Builds a throwaway database beside the one ``--postgres-url`` (else
``DATABASE_URL``, else ``postgres://postgres@127.0.0.1:5432/bench``) names,
migrates it, stores ``--messages`` messages (default 200,000) for ``--users``
users through the ORM (so the database's triggers index every row, as in
production), runs ``ANALYZE``, then times ``--queries`` searches (default 100,
half one word, half two words, each by a random owner) and prints p50, p95 and
the maximum. What is timed is what ``GET /api/search/`` asks the database for
one page: the ranked, filtered query with its snippets, 21 rows. Query words
are half common (frequency ranks 50 to 2,000 of a Zipf-distributed vocabulary
of 20,000 pseudo-words), half drawn from the whole vocabulary.

Then ``--hostile`` hostile searches (default 100), by random owners, through
the bounded path the API takes (word cap, newest candidates, statement
timeout): the word cap's worth of common words, the very commonest words
(frequency ranks 0 to 50), one- and two-letter prefixes, and the cap's worth
of one-letter prefixes. A search the timeout stopped counts at the time it
took. It prints their p95 with PASS or MISS against the target: p95 under
``SEARCH_TIMEOUT_SECONDS`` (5 s), that is no search holds a thread and a
connection past the bound. It asserts nothing; ``docs/performance.md``
records a run.

    .venv/bin/python bench/search.py
    .venv/bin/python bench/search.py --messages 50000 --queries 200
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from typing import Any

from databases import fresh_database  # bench/ is sys.path[0] when run as a script

MESSAGES_PER_CONVERSATION = 100
VOCABULARY = 20_000


def words(rng: random.Random) -> list[str]:
    """A vocabulary of pseudo-words; drawn with Zipf-like weights, as natural text is."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: set[str] = set()
    while len(seen) < VOCABULARY:
        seen.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(seen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--hostile", type=int, default=100)
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args(argv)

    with fresh_database("postgres", args.postgres_url, label="search") as description:
        import django

        django.setup()
        print(f"# {description}")
        run(args)
    return 0


def run(args: argparse.Namespace) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from conversations.domain import ChatMessage, ToolCall
    from conversations.models import Conversation, Message
    from conversations.selectors.search import search_page
    from conversations.services.transcript.messages import append_messages

    call_command("migrate", verbosity=0)
    rng = random.Random(args.seed)
    vocabulary = words(rng)
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    users = [get_user_model().objects.create_user(username=f"bench{i}") for i in range(args.users)]

    started = time.perf_counter()
    conversations = max(1, args.messages // MESSAGES_PER_CONVERSATION)
    for index in range(conversations):
        conversation = Conversation.objects.create(
            owner=users[index % len(users)], title=f"c{index}"
        )
        batch = []
        for position in range(MESSAGES_PER_CONVERSATION - 4):
            text = " ".join(rng.choices(vocabulary, weights, k=rng.randint(8, 30)))
            role = "user" if position % 2 == 0 else "assistant"
            batch.append(
                Message(conversation=conversation, position=position, role=role, content=text)
            )
        Message.objects.bulk_create(batch)
        # One tool turn per conversation: a call with arguments, its result, the answer.
        city = rng.choices(vocabulary, weights)[0]
        append_messages(
            conversation=conversation,
            messages=[
                ChatMessage.user(f"weather in {city}?"),
                ChatMessage.assistant_tool_calls(
                    [ToolCall(id="c1", name="get_weather", arguments={"city": city})]
                ),
                ChatMessage.tool_result("c1", f'{{"city": "{city}", "sky": "clear"}}'),
                ChatMessage.assistant(f"It is clear in {city}."),
            ],
        )
        if (index + 1) % 200 == 0:
            print(f"  {(index + 1) * MESSAGES_PER_CONVERSATION} messages stored", flush=True)
    stored = Message.objects.count()
    print(f"stored {stored} messages in {time.perf_counter() - started:.0f} s")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    queries: list[tuple[Any, str]] = []
    for index in range(args.queries):
        count = 1 if index % 2 == 0 else 2
        # Half common words (frequency ranks 50 to 2,000: the very top of a Zipf
        # vocabulary is stop words, which nobody searches for), half any word.
        pool = vocabulary[50:2000] if index % 4 < 2 else vocabulary
        queries.append((rng.choice(users), " ".join(rng.sample(pool, count))))
    for user, text in queries[:5]:  # warm the caches
        search_page(query=text, user=user, limit=21)
    timings: list[float] = []
    found = 0
    for user, text in queries:
        begin = time.perf_counter()
        rows = search_page(query=text, user=user, limit=21)
        timings.append((time.perf_counter() - begin) * 1000)
        found += len(rows)

    print(
        f"{len(timings)} searches over {stored} messages ({len(users)} users): "
        f"p50 {statistics.median(timings):.1f} ms, p95 {p95(timings):.1f} ms, "
        f"max {max(timings):.1f} ms; {found} rows returned"
    )
    for count in (1, 2):
        chosen = [t for (_, q), t in zip(queries, timings, strict=True) if len(q.split()) == count]
        print(f"  {count} word(s): {len(chosen)} searches, p95 {p95(chosen):.1f} ms")
    hostile(args, rng, vocabulary, users, stored)


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def hostile_queries(rng: random.Random, vocabulary: list[str], count: int) -> list[tuple[str, str]]:
    """``count`` (kind, query) pairs, the four kinds in turn."""
    from conversations.selectors.search_bounds import max_words

    cap = max_words()
    letters = "abcdefghijklmnopqrstuvwxyz"
    kinds = {
        "long": lambda: " ".join(rng.sample(vocabulary[50:2000], cap)),
        "common": lambda: " ".join(rng.sample(vocabulary[:50], rng.randint(1, 2))),
        "prefix": lambda: "".join(rng.sample(letters, rng.randint(1, 2))),
        "prefixes": lambda: " ".join(rng.sample(letters, cap)),
    }
    names = list(kinds)
    return [(names[i % len(names)], kinds[names[i % len(names)]]()) for i in range(count)]


def hostile(
    args: argparse.Namespace,
    rng: random.Random,
    vocabulary: list[str],
    users: list[Any],
    stored: int,
) -> None:
    """Time hostile searches through the bounded path; print p95 against the timeout."""
    from conversations.exceptions import SearchTimeout
    from conversations.selectors.search import search_page
    from conversations.selectors.search_bounds import max_candidates, search_timeout

    timings: dict[str, list[float]] = {}
    stopped = 0
    for kind, text in hostile_queries(rng, vocabulary, args.hostile):
        begin = time.perf_counter()
        try:
            search_page(query=text, user=rng.choice(users), limit=21)
        except SearchTimeout:
            stopped += 1
        timings.setdefault(kind, []).append((time.perf_counter() - begin) * 1000)
    every = [t for values in timings.values() for t in values]
    target = search_timeout() * 1000
    verdict = "PASS" if p95(every) < target else "MISS"
    print(
        f"{len(every)} hostile searches over {stored} messages (candidates "
        f"{max_candidates()}, timeout {target:.0f} ms): p50 {statistics.median(every):.1f} ms, "
        f"p95 {p95(every):.1f} ms, max {max(every):.1f} ms, {stopped} stopped; "
        f"target p95 < {target:.0f} ms {verdict}"
    )
    for kind, values in timings.items():
        print(f"  {kind}: {len(values)} searches, p95 {p95(values):.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
