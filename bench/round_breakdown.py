"""Where one tool round of ``run_tool_loop`` spends its time, statement by statement.

Usage, from the repository root::

    .venv/bin/python bench/round_breakdown.py [--database postgres|sqlite] [--k 1] [--runs 20]

The workload is ``loop_overhead.py``'s (k calls of a trivial tool in each of
5 rounds, then text, a fresh conversation per turn). A round is what happens
between two model calls; each of the 5 rounds of a turn is one sample, and
the figures are medians over all of them. Turns of two kinds alternate:

- **timed**: each statement's time inside ``cursor.execute`` (driver, both
  ways over the socket, and the server), each commit's time (Django's
  ``_commit``: the driver's ``COMMIT``, which waits for the WAL flush), and
  the round's wall time; what is left is Python (ours, Django's, the
  driver's) and the tools' threads.
- **explained** (PostgreSQL only): ``auto_explain`` loaded in the session
  (``LOAD``; no ``shared_preload_libraries`` needed), every statement logged
  with ``log_analyze``, ``log_timing`` (which trigger times need), ``log_triggers`` and
  ``log_nested_statements``, sent to the client as notices: the server's
  execution time of each statement, the time of each trigger it fired, and
  the statements the trigger functions ran.

Nothing here is a test: it prints, and the exit code is 0 with figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# bench/ is sys.path[0] when run as a script
from databases import describe_machine, fresh_database, refresh_statistics
from loop_overhead import ROUNDS, Ours, _statement_shape, echo

AUTO_EXPLAIN = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_analyze = on",
    "SET auto_explain.log_timing = on",
    "SET auto_explain.log_triggers = on",
    "SET auto_explain.log_nested_statements = on",
    "SET auto_explain.log_format = json",
    "SET auto_explain.log_level = notice",
)


@dataclass
class Step:
    """One statement or commit of a round, as seen by the client."""

    label: str
    seconds: float
    server: list[dict[str, Any]] = field(default_factory=list)
    """auto_explain's plans received while it ran: nested statements first, its own last."""


@dataclass
class Recorder:
    """Marks each model call (``Ours.turn`` calls ``mark``) and files each step under its round."""

    server_pid: int | None = None
    """The PostgreSQL backend's process id, when the server runs on this machine."""
    phase: int = 0
    marks: list[float] = field(default_factory=list)
    cpu: list[tuple[float, float]] = field(default_factory=list)
    """(this process's CPU seconds, the backend's CPU seconds) at each mark."""
    steps: dict[int, list[Step]] = field(default_factory=lambda: defaultdict(list))
    notices: list[dict[str, Any]] = field(default_factory=list)

    def mark(self) -> None:
        self.marks.append(time.perf_counter())
        self.cpu.append((time.process_time(), server_cpu(self.server_pid)))
        self.phase += 1

    def round_cpu(self) -> list[tuple[float, float]]:
        """(client, server) CPU seconds of each tool round."""
        return [
            (self.cpu[i + 1][0] - self.cpu[i][0], self.cpu[i + 1][1] - self.cpu[i][1])
            for i in range(ROUNDS)
        ]

    def rounds(self) -> list[list[Step]]:
        """The steps of each tool round: after model call i, before call i + 1."""
        return [self.steps[phase] for phase in range(1, ROUNDS + 1)]

    def round_seconds(self) -> list[float]:
        return [self.marks[i + 1] - self.marks[i] for i in range(ROUNDS)]


def server_cpu(pid: int | None) -> float:
    """CPU seconds the backend has run (``/proc/<pid>/schedstat``, ns); 0 when not readable.

    CPU time, unlike wall time, does not grow while a process waits for a
    core: on a machine other processes keep busy it still says what a
    statement costs the server.
    """
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/schedstat") as stat:
            return int(stat.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def backend_pid(connection: Any) -> int | None:
    """The backend's process id when its ``/proc`` entry is readable here, else ``None``."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = int(cursor.fetchone()[0])
    return pid if server_cpu(pid) > 0 else None


@contextlib.contextmanager
def recording(recorder: Recorder, connection: Any) -> Iterator[None]:
    """Time every statement and commit of the block into ``recorder``."""

    def timed(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        recorder.notices.clear()
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            step = Step(
                _statement_shape(sql), time.perf_counter() - started, list(recorder.notices)
            )
            recorder.steps[recorder.phase].append(step)

    commit = connection._commit

    def timed_commit() -> Any:
        recorder.notices.clear()
        started = time.perf_counter()
        try:
            return commit()
        finally:
            step = Step("COMMIT", time.perf_counter() - started, list(recorder.notices))
            recorder.steps[recorder.phase].append(step)

    connection._commit = timed_commit
    try:
        with connection.execute_wrapper(timed):
            yield
    finally:
        del connection._commit


def explaining(connection: Any, recorder: Recorder, on: bool) -> None:
    """Switch auto_explain's logging on or off for the session; notices go to ``recorder``."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET auto_explain.log_min_duration = {0 if on else -1}")


def _receive(recorder: Recorder) -> Callable[[Any], None]:
    def notice(diagnostic: Any) -> None:
        text = diagnostic.message_primary or ""
        if "plan:" not in text:
            return
        head, _, plan = text.partition("plan:")
        try:
            parsed = json.loads(plan)
            parsed["duration"] = float(head.split("duration:", 1)[1].split("ms")[0])
        except (ValueError, IndexError):
            return
        recorder.notices.append(parsed)

    return notice


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:>7.3f}" if seconds else f"{'':>7}"


def report(timed: list[Recorder], explained: list[Recorder], k: int) -> None:
    rounds = [steps for recorder in timed for steps in recorder.rounds()]
    shapes = [tuple(step.label for step in steps) for steps in rounds]
    sequence = max(set(shapes), key=shapes.count)
    steady = [steps for steps in rounds if tuple(s.label for s in steps) == sequence]
    server_rounds = [
        steps
        for recorder in explained
        for steps in recorder.rounds()
        if tuple(s.label for s in steps) == sequence
    ]
    walls = [seconds for recorder in timed for seconds in recorder.round_seconds()]
    print(
        f"   k={k}: {len(steady)} of {len(rounds)} timed rounds had the usual sequence; "
        f"{len(server_rounds)} explained rounds"
    )
    print(
        f"   {'#':>2}  {'client ms':>9}  {'server ms':>9}  {'triggers':>8}  statement "
        "(medians; server = auto_explain's execution time, triggers included)"
    )
    client_total = 0.0
    for index, label in enumerate(sequence):
        client = [steps[index].seconds for steps in steady]
        client_total += statistics.median(client)
        server, triggers, nested = _server_times(server_rounds, index)
        print(f"   {index + 1:>2}  {_ms(client):>9}  {_ms(server):>9}  {_ms(triggers):>8}  {label}")
        for name, seconds in nested:
            print(f"   {'':>2}  {'':>9}  {_ms(seconds):>9}  {'':>8}    {name}")
    wall = statistics.median(walls)
    print(
        f"   round (wall, median) {wall * 1000:.3f} ms = statements and commits "
        f"{client_total * 1000:.3f} ms (sum of medians) + the rest "
        f"{(wall - client_total) * 1000:.3f} ms (Python, the tools' threads)"
    )
    print(f"   round trips per round: {len(sequence)} ({sequence.count('COMMIT')} commits)")
    cpu = [pair for recorder in timed for pair in recorder.round_cpu()]
    client = statistics.median(pair[0] for pair in cpu) * 1000
    server = statistics.median(pair[1] for pair in cpu) * 1000
    print(
        f"   CPU per round (median): this process {client:.3f} ms (the loop, Django, psycopg, "
        f"the tools' threads), the PostgreSQL backend "
        + (f"{server:.3f} ms" if server else "not readable (server elsewhere)")
    )
    print()


def _server_times(
    server_rounds: list[list[Step]], index: int
) -> tuple[list[float], list[float], list[tuple[str, list[float]]]]:
    """The statement's server time, its triggers' time, and what ran inside it.

    Inside: each trigger's time (by name and calls), and each statement the
    trigger functions ran (auto_explain's duration, by its first words).
    """
    own: list[float] = []
    trigger_total: list[float] = []
    inside: dict[str, list[float]] = defaultdict(list)
    for steps in server_rounds:
        plans = steps[index].server
        if not plans:
            continue
        top = plans[-1]
        own.append(top["duration"] / 1000)
        triggers = top.get("Triggers", [])
        trigger_total.append(sum(float(t.get("Time", 0.0)) for t in triggers) / 1000)
        for trigger in triggers:
            name = f"trigger {trigger.get('Trigger Name')} x{trigger.get('Calls')}"
            inside[name].append(float(trigger.get("Time", 0.0)) / 1000)
        grouped: dict[str, list[float]] = defaultdict(list)
        for nested in plans[:-1]:
            words = " ".join(str(nested.get("Query Text", "")).split())[:64]
            grouped[words].append(nested["duration"] / 1000)
        for words, durations in grouped.items():
            inside[f"   {words} (x{len(durations)}, total)"].append(sum(durations))
    return own, trigger_total, sorted(inside.items(), key=lambda item: item[0].strip()[:1] != "t")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--k", type=int, action="append", help="calls per round (repeatable)")
    parser.add_argument("--runs", type=int, default=20, help="turns of each kind per k")
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    with fresh_database(args.database, args.postgres_url, label="round") as where:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection

        from conversations.tools import registry, tool

        call_command("migrate", verbosity=0, interactive=False)
        user = get_user_model().objects.create_user(username="bench")
        with registry.isolated(empty=True) as tools:
            tool(registry=tools)(echo)
            ours = Ours(user)
            postgres = connection.vendor == "postgresql"
            machine = describe_machine(connection.vendor)
            print(f"== Where a round's time goes: {where}")
            for line in machine:
                print(f"   {line}")
            for k in args.k or [1, 5, 20]:
                for _ in range(args.warmup):
                    ours.turn(k)
                refresh_statistics()
                timed: list[Recorder] = []
                explained: list[Recorder] = []
                for i in range(args.runs * (2 if postgres else 1)):
                    recorder = Recorder(server_pid=backend_pid(connection))
                    explain = postgres and i % 2 == 1
                    if postgres:
                        connection.ensure_connection()
                        raw = connection.connection
                        if not getattr(raw, "_bench_explain", False):
                            for statement in AUTO_EXPLAIN:
                                raw.execute(statement)
                            raw._bench_explain = True
                        handler = _receive(recorder)
                        raw.add_notice_handler(handler)
                        explaining(connection, recorder, explain)
                    with recording(recorder, connection):
                        ours.turn(k, recorder, around=contextlib.nullcontext)  # type: ignore[arg-type]
                    if postgres:
                        explaining(connection, recorder, False)
                        raw.remove_notice_handler(handler)
                    (explained if explain else timed).append(recorder)
                report(timed, explained, k)
            print(f"   load average at the end: {describe_machine(connection.vendor)[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
