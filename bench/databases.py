"""What the loop and history benches share: a throwaway database per run, and the machine's state."""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse, urlunparse

from postgres_admin import postgres_admin  # bench/ is sys.path[0] when run as a script

REPO = Path(__file__).resolve().parent.parent
DEFAULT_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/bench"


def add_database_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument(
        "--postgres-url",
        default=None,
        help="server to use; default DATABASE_URL when it is a postgres:// URL, else "
        f"{DEFAULT_POSTGRES_URL}. Its database is never written: a fresh one is made beside it.",
    )


def each_database(script: str, passed_on: list[str]) -> int:
    """Run ``script`` once per database, each in a process of its own; always 0.

    Django reads its settings once per process, so each database needs its
    own; a failure on one must not hide the other's figures.
    """
    for database in ("sqlite", "postgres"):
        child = [sys.executable, script, "--database", database, *passed_on]
        if subprocess.run(child, check=False).returncode:
            print(f"[{database}: no figures, see the error above]\n", flush=True)
    return 0


def run_bench(
    script: str,
    args: argparse.Namespace,
    passed_on: list[str],
    *,
    label: str,
    work: Callable[[str], None],
) -> int:
    """``work(where)`` on the database ``args`` name, or once per database in its own process.

    The exit code: 0 with figures (whatever they are), 1 when the database
    could not be prepared (said on stderr).
    """
    if args.database == "both":
        if args.postgres_url:
            passed_on = [*passed_on, "--postgres-url", args.postgres_url]
        return each_database(script, passed_on)
    try:
        with fresh_database(args.database, args.postgres_url, label=label) as where:
            work(where)
    except Exception as exc:  # a database that cannot be prepared: say so, and no figures
        print(f"== {args.database}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def fresh_database(database: str, postgres_url: str | None, *, label: str) -> Iterator[str]:
    """Point ``project.settings`` at an empty, throwaway database; yield a description.

    Must run before ``django.setup()``: the settings read the environment once.
    ``label`` goes into the PostgreSQL database's name (``<name>_<label>_<hex>``).
    """
    sys.path.insert(0, str(REPO))  # `project` lives in the repository, not in the venv
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    # With DEBUG on, Django keeps every query in connection.queries: a cost
    # production does not pay, so it must not be in the figures.
    os.environ["DJANGO_DEBUG"] = "0"
    if database == "sqlite":
        # A real file (WAL needs one; :memory: would hide the journal), with
        # the project's own SQLite options (WAL, BEGIN IMMEDIATE).
        os.environ.pop("DATABASE_URL", None)
        folder = tempfile.mkdtemp(prefix=f"bench-{label}-")
        os.environ["SQLITE_PATH"] = str(Path(folder) / "bench.sqlite3")
        try:
            yield f"SQLite, temporary file {os.environ['SQLITE_PATH']}"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    url = postgres_url or os.environ.get("DATABASE_URL", "")
    if urlparse(url).scheme not in {"postgres", "postgresql", "pgsql"}:
        url = DEFAULT_POSTGRES_URL
    parsed = urlparse(url)
    base = unquote(parsed.path.lstrip("/")) or "bench"
    # A new database per invocation: migrations run into an empty schema, and
    # whatever the URL names (perhaps someone's development data) is untouched.
    name = f"{base}_{label}_{uuid.uuid4().hex[:8]}"
    postgres_admin(parsed, f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = urlunparse(parsed._replace(path=f"/{name}"))
    try:
        yield f"PostgreSQL, throwaway database {name} on {parsed.hostname}:{parsed.port or 5432}"
    finally:
        from django.db import connections

        connections.close_all()
        postgres_admin(parsed, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def refresh_statistics() -> None:
    """On PostgreSQL, ANALYZE, as autovacuum would on a production server.

    Without statistics, the plans PL/pgSQL caches for the triggers' queries
    (generic plans, chosen once per connection while the tables are nearly
    empty) can stay sequential scans, and a user or assistant message insert
    then costs time proportional to every tool call in the table: 150 ms at
    8,000 calls on this machine. Servers run with autovacuum off (as the
    development one here does) would measure that instead of the code. ANALYZE
    invalidates the cached plans, so the next ones are made with real figures.
    """
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def describe_machine(vendor: str, *, versions: str = "") -> list[str]:
    """Lines on the software, the load and the database, with a warning when the machine was busy."""
    import django
    from django.db import connection

    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute("SELECT version()")
            server = cursor.fetchone()[0].split(" on ")[0]
            cursor.execute("SHOW fsync")
            fsync = cursor.fetchone()[0]
            cursor.execute("SHOW synchronous_commit")
            sync = cursor.fetchone()[0]
            cursor.execute("SHOW autovacuum")
            autovacuum = cursor.fetchone()[0]
            database = (
                f"{server}, fsync={fsync}, synchronous_commit={sync}, autovacuum={autovacuum}"
            )
        else:
            cursor.execute("SELECT sqlite_version()")
            version = cursor.fetchone()[0]
            cursor.execute("PRAGMA journal_mode")
            journal = cursor.fetchone()[0]
            cursor.execute("PRAGMA synchronous")
            synchronous = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[cursor.fetchone()[0]]
            database = f"SQLite {version}, journal_mode={journal}, synchronous={synchronous}"
    loads = os.getloadavg()
    cpus = os.cpu_count() or 1
    lines = [
        f"Python {platform.python_version()}, Django {django.get_version()}{versions}",
        f"{cpus} CPUs, load average {' '.join(f'{x:.2f}' for x in loads)}",
        database,
    ]
    if loads[0] > 1 + cpus / 2:
        # The bench itself keeps one CPU busy (the 1); beyond that, other
        # processes steal CPU from it (and from the PostgreSQL server) and
        # share the disk's fsyncs.
        lines.append(
            "WARNING: the machine was busy; absolute times are inflated and noisy. "
            "Rerun when idle before quoting them."
        )
    return lines
