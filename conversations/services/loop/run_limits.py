"""How many runs one user may have running at once (``MAX_RUNS_PER_USER``).

A running run holds a thread and, while it reads or writes, a database
connection: without a bound, one user posting into many conversations at once
could take every pooled connection and leave others with 503s. The count is
read from the database (runs of the user's conversations that are
``running``), so it holds across processes and workers. Runs waiting for an
approval hold nothing and do not count.

:func:`check_run_capacity` is the early look, for callers that write
something before the run starts (a branch for an edit): it refuses before
that write. :func:`reserve_run_capacity` is the binding check, inside the
transaction that inserts the run; on PostgreSQL it first takes a
transaction-scoped advisory lock per user, so two requests of one user never
both see a free place. SQLite lets one writer at a time in anyway.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from conversations.conf import max_runs_per_user
from conversations.exceptions import TooManyRuns
from conversations.models import Run

__all__ = ["check_run_capacity", "reserve_run_capacity"]

_LOCK_NAMESPACE = "conversations.runs_per_user:"
"""Prefixed to the user's id before hashing it into the advisory lock's key."""


def check_run_capacity(*, user_id: Any) -> None:
    """Raise :class:`TooManyRuns` when ``user_id`` already has ``MAX_RUNS_PER_USER`` running runs."""
    limit = max_runs_per_user()
    running = Run.objects.filter(conversation__owner_id=user_id, status=Run.Status.RUNNING)
    if running.count() >= limit:
        raise TooManyRuns(
            f"At most {limit} runs may be running at once; wait for one to end.", limit=limit
        )


def reserve_run_capacity(*, user_id: Any) -> None:
    """:func:`check_run_capacity`, serialised per user until the current transaction ends.

    Call it inside the ``transaction.atomic`` block that inserts the run.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"{_LOCK_NAMESPACE}{user_id}"],
            )
    check_run_capacity(user_id=user_id)
