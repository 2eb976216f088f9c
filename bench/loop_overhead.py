"""Per-round overhead of ``run_tool_loop`` next to pydantic-ai's in-memory agent loop.

Usage, from the repository root::

    .venv/bin/python bench/loop_overhead.py [--database sqlite|postgres|both] [--runs N]

The workload: a zero-latency model that asks for ``k`` calls of a trivial tool
in each of 5 rounds, then answers with text, for k = 1, 5 and 20. Our loop
persists every step (ADR 0003); pydantic-ai's ``Agent`` + ``FunctionModel``
keeps everything in memory. Both run the same workload, interleaved, so load
from other processes on the machine hits both alike. Per cell: the median of
``--runs`` turns (a fresh conversation each), divided by 5 rounds.

Then the same with k = 5 calls of a tool that sleeps 200 ms (``time.sleep``):
both loops run the calls of one response concurrently, so a round should
take about one sleep, not five. Its targets: ours within 1.25 x 200 ms per
round, and no slower than pydantic-ai's.

Per round = (time of one whole turn) / 5. The turn also holds what is not a
round: starting the run and storing the user message, and the sixth model call
(the text answer) with the run's end. Both sides are charged the same way
(pydantic-ai's turn also makes six model requests), so the figure is the cost
of a 5-round turn spread over its rounds. The table's query and commit counts
are exact per-round figures instead (counted between two model calls); the
fixed part of a turn is printed under the table.

When the ``bench`` extra's LangGraph is installed, the same cells also run
LangGraph's graph with the checkpointer of the same database
(``PostgresSaver`` or ``SqliteSaver``, ``durability="sync"``; see
``langgraph_peer.py``), interleaved with the other two, and a second table
sets our round against it, with its statements and commits per round and
which loop records a call before running it. Without pydantic-ai or
LangGraph the bench says so and measures what it can.

The performance targets (docs/performance.md) are printed with PASS/MISS. This is information, not a
test: the exit code is 0 whatever the numbers (see docs/performance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version as installed
from pathlib import Path
from typing import Any

# bench/ is sys.path[0] when run as a script
import langgraph_peer
from databases import (
    REPO,
    add_database_options,
    describe_machine,
    each_database,
    fresh_database,
    refresh_statistics,
)

ROUNDS = 5
CALLS_PER_ROUND = (1, 5, 20)
# The targets: the largest acceptable ratio (ours / pydantic-ai) per database and k.
TARGETS = {
    "sqlite": {1: 1.0, 5: 1.0, 20: 0.8},
    "postgresql": {1: 2.0, 5: 1.5, 20: 1.0},
}
# Against LangGraph with the checkpointer of the same database, durability="sync":
# ours must be no slower, for every k.
LANGGRAPH_TARGETS = {
    "sqlite": {1: 1.0, 5: 1.0, 20: 1.0},
    "postgresql": {1: 1.0, 5: 1.0, 20: 1.0},
}
WHO_RECORDS_FIRST = (
    "ours: yes. A round's calls are committed with status `running` before any of them starts;",
    "  after a crash, recovery marks them interrupted and never runs them again.",
    "LangGraph: no. The calls are in the model step's checkpoint, the tools step writes only after",
    "  its calls ran; resuming after a crash runs the tools step, every call of it, again.",
    "pydantic-ai: no record at all (in memory).",
)


def _missing(module: str, what: str) -> str | None:
    try:
        __import__(module)
    except ImportError as exc:
        return (
            f"{what} skipped ({exc}): install the bench extra, "
            "`.venv/bin/pip install -e '.[bench]'`"
        )
    return None


PYDANTIC_AI = _missing("pydantic_ai", "pydantic-ai comparison")
"""Why pydantic-ai is not compared, or ``None`` when it is installed."""
LANGGRAPH_MISSING = langgraph_peer.available()
"""Why LangGraph is not compared, or ``None`` when it is installed."""

# The sleeping cell: k calls of a tool that sleeps this long, in each round.
SLEEP_CALLS = 5
SLEEP_SECONDS = 0.2
SLEEP_TARGET = 1.25
"""Ours must take at most this many sleeps per round (and no longer than pydantic-ai)."""
WRITE_VERBS = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})


def echo(text: str) -> str:
    """Return the text unchanged (the trivial tool both loops run)."""
    return text


def nap(text: str) -> str:
    """Sleep 200 ms, then return the text (the sleeping cell's tool)."""
    time.sleep(SLEEP_SECONDS)
    return text


def call_arguments(round_index: int, call_index: int) -> dict[str, str]:
    return {"text": f"round {round_index} call {call_index}"}


# Command line -------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser)
    parser.add_argument("--runs", type=int, default=30, help="timed turns per cell (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed turns per cell first")
    parser.add_argument(
        "--durability",
        choices=("settings", "relaxed"),
        default="settings",
        help="settings: commits as configured (the figures that count). relaxed, a what-if: "
        "commits that do not wait for the disk (SQLite synchronous=NORMAL, PostgreSQL "
        "synchronous_commit=off), to show how much of a round is fsync",
    )
    parser.add_argument(
        "--profile",
        type=int,
        metavar="K",
        choices=CALLS_PER_ROUND,
        help="after the table, profile our loop at this k (cProfile + time per SQL statement)",
    )
    parser.add_argument(
        "--skip-sleeping",
        action="store_true",
        help="leave out the sleeping cell (5 calls of a 200 ms tool per round)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.database == "both":
        return each_database(__file__, _passed_on(args))
    return bench_one(args)


def _passed_on(args: argparse.Namespace) -> list[str]:
    passed = ["--runs", str(args.runs), "--warmup", str(args.warmup)]
    passed += ["--durability", args.durability]
    if args.postgres_url:
        passed += ["--postgres-url", args.postgres_url]
    if args.profile:
        passed += ["--profile", str(args.profile)]
    if args.skip_sleeping:
        passed.append("--skip-sleeping")
    return passed


# Database setup -----------------------------------------------------------------


def relax_durability(connection: Any) -> None:
    """Commit without waiting for the disk, on this and any later connection.

    SQLite's synchronous=NORMAL in WAL mode syncs at checkpoints instead of at
    each commit; PostgreSQL's synchronous_commit=off returns before the WAL is
    flushed. Neither can corrupt the database or break a constraint: a crash of
    the machine (not of our process) loses the last moments of commits.
    """
    from django.db.backends.signals import connection_created

    def relax(sender: Any, connection: Any, **kwargs: Any) -> None:
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute("PRAGMA synchronous = NORMAL")
            else:
                cursor.execute("SET synchronous_commit TO off")

    connection_created.connect(relax, weak=False)
    connection.close()  # the next query opens a connection, which the handler relaxes


# Counting queries and commits ----------------------------------------------------


@dataclass
class Counts:
    """Statements and committed write transactions of one turn, read at each model call."""

    captured: Any = None
    """The CaptureQueriesContext recording the turn."""
    commits: int = 0
    marks: list[tuple[int, int]] = field(default_factory=list)
    """(queries, commits) at each model call, then once more at the end of the turn."""

    def queries(self) -> int:
        return sum(
            1
            for query in self.captured.captured_queries
            if not is_transaction_control(query["sql"])
        )

    def mark(self) -> None:
        self.marks.append((self.queries(), self.commits))


@contextlib.contextmanager
def counting(counts: Counts) -> Iterator[None]:
    """Record the statements and commits of the block into ``counts``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with (
        CaptureQueriesContext(connection) as captured,
        connection.execute_wrapper(CommitCounter(connection, counts)),
    ):
        counts.captured = captured
        yield
        counts.mark()


class CommitCounter:
    """An ``execute_wrapper`` that counts committed write transactions.

    COMMIT itself never passes through Django's cursor (psycopg and sqlite3
    commit at the driver level), so commits are derived from the writes:

    - a write statement outside ``atomic`` runs in autocommit mode: one commit;
    - the first write inside an outermost ``atomic`` block registers an
      ``on_commit`` hook, which Django runs only if that block commits: one
      commit per block that wrote, none for a rolled-back one.

    Read-only transactions are not counted: their commit writes no WAL, so it
    costs no fsync on PostgreSQL and nothing worth counting on SQLite.
    """

    def __init__(self, connection: Any, counts: Counts) -> None:
        self.connection = connection
        self.counts = counts
        self._pending: object | None = None  # the outermost block awaiting its commit

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if verb in WRITE_VERBS:
            self._count_write()
        return execute(sql, params, many, context)

    def _count_write(self) -> None:
        from django.db import transaction

        connection = self.connection
        if not connection.in_atomic_block:
            self.counts.commits += 1
            return
        outermost = connection.atomic_blocks[0]
        if self._pending is not outermost:
            self._pending = outermost
            transaction.on_commit(self._committed)

    def _committed(self) -> None:
        self.counts.commits += 1
        self._pending = None


def is_transaction_control(sql: str) -> bool:
    # SQLite's BEGIN IMMEDIATE goes through Django's cursor (so tests'
    # query counts see it); PostgreSQL's BEGIN does not. Leaving it out makes
    # the two databases' query counts comparable.
    return sql.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK"))


# The workload --------------------------------------------------------------------


@dataclass
class Ours:
    """Our loop with the bench's tool registered and one user to own conversations."""

    user: Any
    tool: str = "echo"
    """The name of the registered tool the model calls."""

    def turn(
        self,
        k: int,
        counts: Counts | None = None,
        around: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> float:
        """One 5-round turn on a fresh conversation; its duration in seconds.

        ``around`` wraps exactly the timed part (counting, profiling); ``counts``
        is marked at each model call.
        """
        from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
        from conversations.services.loop.tool_loop import run_tool_loop
        from conversations.services.transcript.messages import create_conversation

        def tool_round(round_index: int) -> Callable[..., Any]:
            # Callables, so each turn gets fresh call ids (unique per conversation anyway).
            def respond(messages: Any, tools: Any, options: Any) -> Any:
                if counts is not None:
                    counts.mark()
                calls = ((self.tool, call_arguments(round_index, i)) for i in range(k))
                return scripted_calls(*calls)

            return respond

        def answer(messages: Any, tools: Any, options: Any) -> Any:
            if counts is not None:
                counts.mark()
            return scripted_text("done")

        provider = ScriptedProvider([*(tool_round(r) for r in range(ROUNDS)), answer])
        conversation = create_conversation(owner=self.user, title=f"bench k={k}")
        gc.collect()  # start each timed turn from the same heap state, as for pydantic-ai
        with around():
            started = time.perf_counter()
            run = run_tool_loop(
                conversation=conversation,
                content="Go.",
                provider=provider,
                # One more than the tool rounds: the text answer ends the run `completed`.
                max_iterations=ROUNDS + 1,
            )
            elapsed = time.perf_counter() - started
        if run.status != "completed" or provider.remaining:
            raise RuntimeError(f"the bench turn ended {run.status!r} ({run.error_code!r})")
        return elapsed

    def counted_turn(self, k: int) -> Counts:
        """One instrumented turn (never timed: the instrumentation costs time)."""
        counts = Counts()
        self.turn(k, counts, around=lambda: counting(counts))
        return counts


def pydantic_agent(k: int, tool: Callable[[str], str] = echo) -> Any:
    """An Agent whose FunctionModel asks for k calls of ``tool`` per round for 5 rounds, then answers.

    pydantic-ai runs the calls of one response concurrently (a function
    like ``tool`` in a worker thread each).
    """
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    def model(messages: list[Any], info: Any) -> ModelResponse:
        done = sum(1 for message in messages if isinstance(message, ModelResponse))
        if done < ROUNDS:
            # ToolCallPart makes a fresh tool_call_id per part.
            return ModelResponse(
                parts=[ToolCallPart(tool.__name__, call_arguments(done, i)) for i in range(k)]
            )
        return ModelResponse(parts=[TextPart("done")])

    return Agent(FunctionModel(model), tools=[tool], name="bench")


def pydantic_turn(agent: Any) -> float:
    gc.collect()
    started = time.perf_counter()
    result = agent.run_sync("Go.")
    elapsed = time.perf_counter() - started
    if result.output != "done":
        raise RuntimeError(f"pydantic-ai's turn ended with {result.output!r}")
    return elapsed


# Measuring and reporting ------------------------------------------------------------


@dataclass
class Cell:
    k: int
    ours: list[float]
    theirs: list[float]
    """pydantic-ai's turns (empty without it)."""
    counts: Counts
    graph: list[float] = field(default_factory=list)
    """LangGraph's turns (empty without it)."""
    graph_tally: Any = None
    """LangGraph's counted turn (a ``langgraph_peer.Tally``), or ``None``."""
    cpu: dict[str, list[float]] = field(default_factory=dict)
    """CPU seconds of each turn by loop ("ours", "graph"): this process's, plus the database
    backend's when it runs on this machine (PostgreSQL)."""

    def per_round_ms(self, samples: list[float]) -> float:
        return statistics.median(samples) / ROUNDS * 1000

    def quartiles_ms(self, samples: list[float]) -> tuple[float, float]:
        if len(samples) < 2:
            return samples[0] / ROUNDS * 1000, samples[0] / ROUNDS * 1000
        q1, _, q3 = statistics.quantiles(samples, n=4)
        return q1 / ROUNDS * 1000, q3 / ROUNDS * 1000

    def round_counts(self) -> list[tuple[int, int]]:
        """(queries, commits) of each tool round: from model call i to model call i + 1."""
        return _per_round(self.counts.marks)

    def graph_round_counts(self) -> list[tuple[int, int]]:
        """LangGraph's (statements, commits) of each tool round, counted the same way."""
        return _per_round(self.graph_tally.marks)


def _per_round(marks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [_difference(marks[i], marks[i + 1]) for i in range(ROUNDS)]


def _difference(before: tuple[int, int], after: tuple[int, int]) -> tuple[int, int]:
    return after[0] - before[0], after[1] - before[1]


def measure(
    ours: Ours,
    k: int,
    runs: int,
    warmup: int,
    tool: Callable[[str], str] = echo,
    graph: Any = None,
) -> Cell:
    """Our turns, pydantic-ai's (when installed) and ``graph``'s (a LangGraphLoop, or None),
    interleaved turn by turn."""
    agent = pydantic_agent(k, tool) if PYDANTIC_AI is None else None
    loops: list[tuple[list[float], Callable[[], float], list[float], Callable[[], float]]] = []
    mine: list[float] = []
    theirs: list[float] = []
    graphs: list[float] = []
    cpu: dict[str, list[float]] = {"ours": [], "pydantic-ai": [], "graph": []}
    loops.append((mine, lambda: ours.turn(k), cpu["ours"], _server_clock(_django_backend())))
    if agent is not None:
        loops.append((theirs, lambda: pydantic_turn(agent), cpu["pydantic-ai"], lambda: 0.0))
    if graph is not None:
        server = _server_clock(graph.backend_pid())
        loops.append((graphs, lambda: graph.turn(k), cpu["graph"], server))
    for _ in range(warmup):
        for _samples, turn, _cpu, _server in loops:
            turn()
    refresh_statistics()
    # What exists now (Django, pydantic-ai and their imports, the agent) lives for
    # the whole process: freezing it keeps collections during a timed turn from
    # rescanning it, so a turn pays only for the garbage it makes itself.
    gc.collect()
    gc.freeze()
    counts = ours.counted_turn(k)
    tally = graph.counted_turn(k) if graph is not None else None
    for i in range(runs):
        # Rotate who goes first, so none always runs on a warmer cache.
        shift = i % len(loops)
        for samples, turn, spent, server in loops[shift:] + loops[:shift]:
            started = time.process_time(), server()
            samples.append(turn())
            spent.append(time.process_time() - started[0] + server() - started[1])
    return Cell(k, mine, theirs, counts, graphs, tally, cpu)


def _django_backend() -> int | None:
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _server_clock(pid: int | None) -> Callable[[], float]:
    """CPU seconds the database backend ``pid`` has run, when its ``/proc`` entry is readable
    (the server on this machine); else always 0."""

    def clock() -> float:
        try:
            with open(f"/proc/{pid}/schedstat") as stat:
                return int(stat.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            return 0.0

    return clock if pid is not None and clock() > 0 else lambda: 0.0


def _row(cell: Cell, samples: list[float]) -> str:
    q1, q3 = cell.quartiles_ms(samples)
    return f"{cell.per_round_ms(samples):>7.2f} [{q1:>5.2f}-{q3:>5.2f}]"


def _steady(per_round: list[tuple[int, int]]) -> tuple[str, str]:
    """The counts of a round, or '*' when they differ between rounds."""
    if all(c == per_round[0] for c in per_round):
        return str(per_round[0][0]), str(per_round[0][1])
    return "*", "*"


def print_table(vendor: str, where: str, cells: list[Cell], runs: int, machine: list[str]) -> None:
    title = "PostgreSQL" if vendor == "postgresql" else "SQLite"
    print(f"== {title}: {where}")
    for line in machine:
        print(f"   {line}")
    print(f"   median of {runs} turns per cell; ms per round = turn / {ROUNDS}; IQR in brackets")
    print()
    if PYDANTIC_AI is not None:
        print(f"   {PYDANTIC_AI}")
    header = (
        f"{'k':>3}  {'ours ms/round':>22}  {'queries':>7}  {'commits':>7}  "
        f"{'pydantic-ai ms/round':>22}  {'ratio':>5}  {'target':>6}"
    )
    print(header)
    print("-" * (len(header) + 6))
    for cell in cells:
        queries, commits = _steady(cell.round_counts())
        line = f"{cell.k:>3}  {_row(cell, cell.ours)}  {queries:>7}  {commits:>7}  "
        if cell.theirs:
            ratio = cell.per_round_ms(cell.ours) / cell.per_round_ms(cell.theirs)
            target = TARGETS[vendor][cell.k]
            line += (
                f"{_row(cell, cell.theirs)}  {ratio:>5.2f}  "
                f"{'<= ' + format(target, '.1f'):>6}  {'PASS' if ratio <= target else 'MISS'}"
            )
        else:
            line += f"{'(not installed)':>22}"
        print(line)
        if queries == "*":
            print(f"     * counts differ between rounds (queries, commits): {cell.round_counts()}")
    first = cells[0].counts
    start_q, start_c = first.marks[0]
    end_q, end_c = _difference(first.marks[-2], first.marks[-1])
    print(
        "   queries/commits: per tool round, counted between two model calls (BEGIN not "
        "counted; commits = committed write transactions)."
    )
    print(
        f"   Outside the rounds, per turn: before the first model call {start_q} queries / "
        f"{start_c} commits; after the last (answer stored, run finished) {end_q} / {end_c}."
    )
    print()
    print_graph_table(vendor, cells)


def print_graph_table(vendor: str, cells: list[Cell]) -> None:
    """Ours against LangGraph with its checkpointer for this database, sync durability."""
    if not cells[0].graph:
        print(f"   {LANGGRAPH_MISSING}")
        print()
        return
    saver = "PostgresSaver" if vendor == "postgresql" else "SqliteSaver"
    print(f"   vs LangGraph + {saver}, durability='sync', the same turns interleaved")
    print(f"   ({langgraph_peer.versions()})")
    header = (
        f"{'k':>3}  {'ours ms/round':>22}  {'q':>3}  {'c':>3}  "
        f"{'LangGraph ms/round':>22}  {'q':>3}  {'c':>3}  {'ratio':>5}  {'target':>6}  "
        f"{'CPU ms/round ours / LangGraph':>30}"
    )
    print(header)
    print("-" * (len(header) + 6))
    for cell in cells:
        queries, commits = _steady(cell.round_counts())
        statements, graph_commits = _steady(cell.graph_round_counts())
        ratio = cell.per_round_ms(cell.ours) / cell.per_round_ms(cell.graph)
        target = LANGGRAPH_TARGETS[vendor][cell.k]
        mine_cpu, graph_cpu = (cell.per_round_ms(cell.cpu[name]) for name in ("ours", "graph"))
        print(
            f"{cell.k:>3}  {_row(cell, cell.ours)}  {queries:>3}  {commits:>3}  "
            f"{_row(cell, cell.graph)}  {statements:>3}  {graph_commits:>3}  {ratio:>5.2f}  "
            f"{'<= ' + format(target, '.1f'):>6}  {'PASS' if ratio <= target else 'MISS'}  "
            f"{mine_cpu:>8.2f} / {graph_cpu:<6.2f} ({mine_cpu / graph_cpu:.2f})"
        )
        if statements == "*":
            # LangGraph may store a step's writes from a worker thread while the next
            # step starts: a write then counts in the next round.
            print(f"     * LangGraph's (statements, commits) by round: {cell.graph_round_counts()}")
    print(
        "   LangGraph's q/c: statements its checkpointer sent (each row of an executemany "
        "is one) and write transactions committed, per tool round, counted between two "
        "model calls through the driver's hooks."
    )
    print(
        "   CPU: median per turn / 5 of this process's CPU time (all its threads) plus, "
        + (
            "on PostgreSQL, the CPU time of the loop's server backend (/proc/<pid>/schedstat)"
            if vendor == "postgresql"
            else "on SQLite, nothing more (the database runs in the process)"
        )
        + ": unlike wall time, it does not grow while a process waits for a busy core."
    )
    print("   Which loop records a call as running before it runs it:")
    for line in WHO_RECORDS_FIRST:
        print(f"     {line}")
    print()


def print_sleeping(cell: Cell) -> None:
    """The sleeping cell's figures and its two targets."""
    mine = cell.per_round_ms(cell.ours)
    theirs = cell.per_round_ms(cell.theirs)
    budget = SLEEP_TARGET * SLEEP_SECONDS * 1000
    q1, q3 = cell.quartiles_ms(cell.ours)
    t1, t3 = cell.quartiles_ms(cell.theirs)
    print(
        f"   k={cell.k} calls of a tool sleeping {SLEEP_SECONDS * 1000:.0f} ms (time.sleep) per "
        f"round; median of {len(cell.ours)} turns, ms per round = turn / {ROUNDS}"
    )
    print(f"   ours        {mine:>7.2f} [{q1:.2f}-{q3:.2f}]")
    print(f"   pydantic-ai {theirs:>7.2f} [{t1:.2f}-{t3:.2f}]")
    print(
        f"   ours <= {SLEEP_TARGET} x {SLEEP_SECONDS * 1000:.0f} ms = {budget:.0f} ms per round: "
        f"{'PASS' if mine <= budget else 'MISS'}"
    )
    print(
        f"   ours <= pydantic-ai's (ratio {mine / theirs:.3f}): "
        f"{'PASS' if mine <= theirs else 'MISS'}"
    )
    print()


def profile(ours: Ours, k: int, runs: int) -> None:
    """Where our loop's time goes: Python functions (cProfile) and SQL statements."""
    import cProfile
    import pstats

    from django.db import connection

    timings: dict[str, list[float]] = {}

    def timed(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            timings.setdefault(_statement_shape(sql), []).append(time.perf_counter() - started)

    total = 0.0
    for _ in range(runs):
        total += ours.turn(k, around=lambda: connection.execute_wrapper(timed))
    db_total = sum(sum(v) for v in timings.values())
    print(f"== Profile of our loop, k={k}, {runs} turns")
    print(
        f"   per round: {total / runs / ROUNDS * 1000:.2f} ms, of which "
        f"{db_total / runs / ROUNDS * 1000:.2f} ms inside cursor.execute (driver + server); "
        "commits of atomic blocks are not in that figure (see cProfile below)"
    )
    print(f"   {'ms/round':>8}  {'n/round':>7}  statement")
    for shape, samples in sorted(timings.items(), key=lambda item: -sum(item[1])):
        print(
            f"   {sum(samples) / runs / ROUNDS * 1000:>8.3f}  {len(samples) / runs / ROUNDS:>7.1f}  "
            f"{shape}"
        )
    profiler = cProfile.Profile()
    for _ in range(runs):
        ours.turn(k, around=lambda: profiler)  # a Profile enables itself on __enter__
    print()
    print("   Our functions by cumulative time (per-round ms = cumtime / runs / 5):")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(re.escape(str(REPO / "conversations")), 30)
    print("   Everything by own time:")
    stats.strip_dirs().sort_stats("tottime").print_stats(20)


def _statement_shape(sql: str) -> str:
    """A statement without its values, short enough to read in a table."""
    words = sql.split()
    verb = words[0].upper() if words else ""
    # The table follows INTO for INSERT, the verb for UPDATE, FROM otherwise;
    # only outside parentheses, so a subquery's FROM does not count.
    keyword = {"INSERT": "INTO", "UPDATE": "UPDATE"}.get(verb, "FROM")
    table = ""
    depth = 0
    for word, following in zip(words, [*words[1:], ""], strict=True):
        if depth == 0 and word.upper() == keyword:
            table = following.strip('"')
            break
        depth += word.count("(") - word.count(")")
    extra = " FOR UPDATE" if "FOR NO KEY UPDATE" in sql or "FOR UPDATE" in sql else ""
    if "EXISTS(" in sql.upper():
        extra += " (EXISTS subquery)"
    elif re.match(r'SELECT (1|%s) AS "a" ', sql):
        extra += " (.exists())"
    if verb == "INSERT" and ("UNNEST" in sql or "), (" in sql):
        extra += " (several rows)"
    return f"{verb} {table}{extra}"


def langgraph_loop(connection: Any) -> Any:
    """LangGraph with the checkpointer of ``connection``'s database, in the bench's database."""
    from django.conf import settings

    if connection.vendor == "postgresql":
        return langgraph_peer.LangGraphLoop(
            "postgresql", ROUNDS, call_arguments, echo, postgres_url=os.environ["DATABASE_URL"]
        )
    folder = Path(settings.DATABASES["default"]["NAME"]).parent
    return langgraph_peer.LangGraphLoop(
        "sqlite", ROUNDS, call_arguments, echo, sqlite_path=folder / "langgraph.sqlite3"
    )


def bench_one(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        try:
            where = stack.enter_context(
                fresh_database(args.database, args.postgres_url, label="loop")
            )
        except Exception as exc:
            print(f"== {args.database}: cannot prepare a database: {exc}", file=sys.stderr)
            return 1
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection

        from conversations.tools import registry, tool

        call_command("migrate", verbosity=0, interactive=False)
        if args.durability == "relaxed":
            relax_durability(connection)
            where += "; RELAXED DURABILITY (what-if, not the configured behaviour)"
        user = get_user_model().objects.create_user(username="bench")
        # Only the cell's tool is offered, as only it is given to pydantic-ai.
        tools = stack.enter_context(registry.isolated(empty=True))
        tool(registry=tools)(echo)
        ours = Ours(user)
        load_at_start = os.getloadavg()
        graph = None
        if LANGGRAPH_MISSING is None:
            graph = stack.enter_context(contextlib.closing(langgraph_loop(connection)))
            if args.durability == "relaxed" and connection.vendor == "postgresql":
                graph.saver.conn.execute("SET synchronous_commit TO off")
        cells = [measure(ours, k, args.runs, args.warmup, graph=graph) for k in CALLS_PER_ROUND]
        sleeping = None
        if not args.skip_sleeping and PYDANTIC_AI is None:
            with registry.isolated(empty=True) as napping:
                tool(registry=napping)(nap)
                sleeping = measure(Ours(user, tool="nap"), SLEEP_CALLS, args.runs, args.warmup, nap)
        versions = "" if PYDANTIC_AI else f", pydantic-ai-slim {installed('pydantic-ai-slim')}"
        machine = describe_machine(connection.vendor, versions=versions)
        machine.insert(
            2, "load average when the cells started " + " ".join(f"{x:.2f}" for x in load_at_start)
        )
        print_table(connection.vendor, where, cells, args.runs, machine)
        if sleeping is not None:
            print_sleeping(sleeping)
        elif PYDANTIC_AI is not None:
            print(f"   The sleeping cell needs pydantic-ai: {PYDANTIC_AI}")
        if args.profile:
            profile(ours, args.profile, args.runs)
    # Informational only: a missed target is reported above, never as a failure.
    return 0


if __name__ == "__main__":
    sys.exit(main())
