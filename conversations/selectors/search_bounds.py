"""What bounds a search's cost: its words, the matches it ranks, and its time.

A query has at most ``SEARCH_MAX_WORDS`` words (the API refuses more; other
callers get the first ones), only the newest ``SEARCH_MAX_CANDIDATES``
matching messages are ranked, and the query that fetches a page runs under
``SEARCH_TIMEOUT_SECONDS``: PostgreSQL's ``statement_timeout`` set for its
transaction only, SQLite's progress handler that interrupts it once the time
has passed. A cancelled query is :class:`~conversations.exceptions.SearchTimeout`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError, connection, transaction

from conversations.conf import positive_setting
from conversations.exceptions import SearchTimeout

__all__ = ["max_candidates", "max_words", "run_bounded", "search_timeout"]

T = TypeVar("T")

_QUERY_CANCELED = "57014"
"""PostgreSQL's SQLSTATE for a statement cancelled by ``statement_timeout``."""
_SQLITE_STEPS = 1_000
"""Virtual machine steps between two looks at the clock (a few microseconds each)."""


def max_words() -> int:
    """``SEARCH_MAX_WORDS``, validated."""
    return int(positive_setting("SEARCH_MAX_WORDS", integer=True))


def max_candidates() -> int:
    """``SEARCH_MAX_CANDIDATES``, validated."""
    return int(positive_setting("SEARCH_MAX_CANDIDATES", integer=True))


def search_timeout() -> float:
    """``SEARCH_TIMEOUT_SECONDS``, validated."""
    return positive_setting("SEARCH_TIMEOUT_SECONDS")


def run_bounded(fetch: Callable[[], T]) -> T:
    """``fetch()`` (which runs the search's queries) cut at the search timeout.

    Raises :class:`SearchTimeout` when the database cancelled it, so the
    thread and its connection are free again within the bound.
    """
    seconds = search_timeout()
    if connection.vendor == "postgresql":
        return _postgres(fetch, seconds)
    if connection.vendor == "sqlite":
        return _sqlite(fetch, seconds)
    return fetch()


def _postgres(fetch: Callable[[], T], seconds: float) -> T:
    outer = connection.in_atomic_block
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                # set_config(..., true) is SET LOCAL: it ends with the transaction, so a
                # pooled connection never keeps the bound for its next user.
                cursor.execute(
                    "SELECT current_setting('statement_timeout'),"
                    " set_config('statement_timeout', %s, true)",
                    (f"{max(1, round(seconds * 1000))}ms",),
                )
                (previous, _) = cursor.fetchone()
            found = fetch()
            if outer:
                # Inside a caller's transaction the savepoint's release keeps the SET LOCAL
                # until that transaction ends; give the caller its own bound back.
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)", (previous,))
            return found
    except OperationalError as error:
        if getattr(error.__cause__, "sqlstate", None) == _QUERY_CANCELED:
            raise _timed_out(seconds) from None
        raise


def _sqlite(fetch: Callable[[], T], seconds: float) -> T:
    connection.ensure_connection()
    raw = connection.connection
    deadline = time.monotonic() + seconds

    def past_deadline() -> int:
        # Non-zero makes SQLite interrupt the running statement ("interrupted").
        return int(time.monotonic() > deadline)

    raw.set_progress_handler(past_deadline, _SQLITE_STEPS)
    try:
        return fetch()
    except OperationalError as error:
        if "interrupted" in str(error):
            raise _timed_out(seconds) from None
        raise
    finally:
        raw.set_progress_handler(None, _SQLITE_STEPS)


def _timed_out(seconds: float) -> SearchTimeout:
    return SearchTimeout(
        f"The search took longer than {seconds:g} s and was stopped; use fewer or longer words,"
        " or narrow it with filters.",
    )
