"""Running a ``hot_path`` statement and its ORM equivalent on the same rows, and comparing.

Each side runs in a savepoint that is rolled back once every row of the
tables the statements touch has been read. The rows are read as stored: on
SQLite as the literal ``quote()`` makes of each value (a timestamp is text
there, a decimal an integer or a real, so a different spelling or storage
class of the same value shows), on PostgreSQL as the ``repr`` of the typed
value the driver returns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ObjectDoesNotExist
from django.db import connection, transaction

from conversations.exceptions import RunFencedOut
from conversations.models import (
    Budget,
    BudgetCounter,
    Conversation,
    LanguageModel,
    Run,
    ToolSetting,
)
from conversations.models import ToolCall as ToolCallRow

TABLES = (Conversation, Run, ToolCallRow, Budget, BudgetCounter, ToolSetting, LanguageModel)
"""The tables the statements write or read: a stray write to any of them shows too."""

Rows = dict[str, list[dict[str, str]]]


@functools.cache
def _columns(vendor: str, table: str) -> tuple[str, ...]:
    with connection.cursor() as cursor:
        return tuple(c.name for c in connection.introspection.get_table_description(cursor, table))


def stored_rows() -> Rows:
    """Every row of :data:`TABLES`, each column's value as stored (see the module docstring)."""
    quote, sqlite = connection.ops.quote_name, connection.vendor == "sqlite"
    rows: Rows = {}
    with connection.cursor() as cursor:
        for model in TABLES:
            table = model._meta.db_table
            names = _columns(connection.vendor, table)
            # The driver would turn SQLite's text back into datetimes, hiding
            # how it is spelled; quote() gives the stored value as a literal.
            read = "quote({})" if sqlite else "{}"
            columns = ", ".join(read.format(quote(name)) for name in names)
            cursor.execute(f"SELECT {columns} FROM {quote(table)}")
            found = [
                {n: v if sqlite else repr(v) for n, v in zip(names, row, strict=True)}
                for row in cursor
            ]
            if model is BudgetCounter:
                # A counter inserted on one side takes the sequence's next id,
                # which on PostgreSQL a rollback does not give back, so the other
                # side's differs: a counter is known by its budget and period.
                for row in found:
                    del row["id"]
            rows[table] = sorted(found, key=lambda row: sorted(row.items()))
    return rows


@dataclass(frozen=True)
class Written:
    """What one side left: its outcome and every row."""

    outcome: object
    """What it returned, or the type of the error it raised."""
    rows: Rows
    """:func:`stored_rows` before the rollback."""


def written(operation: Callable[[], object]) -> Written:
    """Run ``operation`` in a savepoint, read the rows it leaves, roll it back."""
    savepoint = transaction.savepoint()
    try:
        try:
            outcome = operation()
        except (RunFencedOut, ObjectDoesNotExist) as error:
            outcome = type(error)
        return Written(outcome, stored_rows())
    finally:
        transaction.savepoint_rollback(savepoint)


def assert_same_rows(
    by_hand: Callable[[], object], by_orm: Callable[[], object], *, writes: bool
) -> object:
    """Both sides leave the same rows and outcome; ``writes``: whether they change any row."""
    before = stored_rows()
    hand, orm = written(by_hand), written(by_orm)
    # Pytest rewrites the assertions of test modules only: the messages say what differs.
    for table in before:
        assert hand.rows[table] == orm.rows[table], (
            f"{table}\nby hand: {hand.rows[table]}\nby the ORM: {orm.rows[table]}"
        )
    assert hand.outcome == orm.outcome, f"by hand: {hand.outcome!r}, by the ORM: {orm.outcome!r}"
    # Not vacuous: the case changes rows, or it is one that must change none.
    assert (hand.rows != before) is writes
    return hand.outcome
