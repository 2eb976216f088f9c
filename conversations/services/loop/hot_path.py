"""The tool loop's hand-written SQL: statements the ORM cannot write as one, or writes slowly.

Everything else the loop stores goes through the ORM. Some steps of a turn
need what the ORM does not say in a single statement (on PostgreSQL each
statement is a round trip to the server); others run every round, and there
building the statement through the ORM costs more Python time than running
it. They are written here, once, for both databases:

- :func:`open_turn`: in the transaction that inserts a run, the
  conversation's ``updated_at`` is bumped (its row lock, as
  ``append_messages`` takes it), and whether any budget applies, the tool
  settings and the language model's prices come back in the same ``UPDATE
  ... RETURNING`` (the settings as one JSON array: ``json_agg`` on
  PostgreSQL, ``json_group_array`` on SQLite), so that no model call of the
  turn reads them.

- :func:`hold_for_results`: before a turn's results are stored, the run is
  fenced (still ``running`` under this process's claim), the conversation's
  ``updated_at`` is bumped (which takes its row lock, as ``append_messages``
  does), and the run's ``cancel_requested`` and whether any budget applies
  come back, so that the next round asks neither. PostgreSQL does it in one
  ``UPDATE`` with a data-modifying ``WITH`` (the run row is locked first, as
  recovery locks it), which also writes the calls' states when given them.
  SQLite has no data-modifying ``WITH``; it serialises writers (``BEGIN
  IMMEDIATE``), so there the conversation is updated only if the run is
  held, the run's heartbeat is left to the heartbeat thread, and the caller
  writes the states.
- :func:`charge_run`: a model call's tokens, its cost and a round added to
  the run's counters, and its heartbeat refreshed, fenced, in one ``UPDATE``
  that returns the run's ``cancel_requested`` (the ORM writes the same
  statement, but builds seven ``F()`` expressions and a ``Coalesce`` to say
  it, which cost more than the statement itself); with ``touch``, on
  PostgreSQL the same statement bumps the conversation (ADR 0026).
- :func:`update_call_states`: every call's status, error and times in one
  ``UPDATE ... FROM (VALUES ...)``, where ``bulk_update`` would build one
  ``CASE`` per field and row.

Two statements of the same kind live beside the code they serve:
``transcript.messages.touch_conversation`` (the conversation's ``updated_at``
bumped, which takes its row lock) and ``usage.budgets.charge_counters`` (a
recorded call added to each covering budget's counter in one ``INSERT ... ON
CONFLICT DO UPDATE``). The helpers all of them share are in ``services._sql``.

Only placeholders and our own table names go into the SQL text. The values
are the ones the ORM would write (datetimes through
``connection.ops.adapt_datetimefield_value``, primary keys through their
field's ``get_db_prep_value``), so the rows are those of the ORM path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Field
from django.utils import timezone

from conversations.conf import app_settings
from conversations.domain import USAGE_FIELDS, Usage
from conversations.exceptions import RunFencedOut
from conversations.models import (
    ApprovalPolicy,
    Budget,
    Conversation,
    LanguageModel,
    Run,
    ToolSetting,
)
from conversations.models import ToolCall as ToolCallRow
from conversations.selectors import ToolSettings

from .. import _sql
from ..transcript.messages import touch_conversation
from ..usage.prices import PRICE_FIELDS, Prices

__all__ = [
    "Held",
    "Opened",
    "charge_run",
    "hold_for_results",
    "open_turn",
    "update_call_states",
]


@dataclass(frozen=True, slots=True)
class Held:
    """What :func:`hold_for_results` read while it held the run."""

    cancel_requested: bool
    """Whether a cancellation was asked for."""
    budgets_apply: bool
    """Whether any active budget covers the run's next model call (block or warn)."""
    states_stored: bool = False
    """Whether the same statement wrote the calls' states (PostgreSQL)."""


def _budgets_apply_sql() -> str:
    """``EXISTS`` over the budgets ``applicable_budgets`` would return (two placeholders)."""
    budget = _sql.table(Budget)
    return (
        f"EXISTS (SELECT 1 FROM {budget} b WHERE b.is_active = %s AND ("
        f"b.scope = '{Budget.Scope.GLOBAL}'"
        f" OR (b.scope = '{Budget.Scope.USER}' AND b.user_id = %s)"
        f" OR (b.scope = '{Budget.Scope.PROFILE}' AND b.profile_id = %s)))"
    )


@dataclass(frozen=True, slots=True)
class Opened:
    """What :func:`open_turn` read while it took the conversation."""

    budgets_apply: bool
    """Whether any active budget covers the run's first model call (block or warn)."""
    tool_settings: ToolSettings
    """The tool settings, read in the same statement."""
    prices: Prices
    """The prices of the run's language model, read in the same statement (all unknown
    without a profile)."""


def _price_fields() -> list[Field[Any, Any]]:
    fields = [LanguageModel._meta.get_field(name) for name in PRICE_FIELDS]
    return [field for field in fields if isinstance(field, Field)]


def _prices_sql(language_model_id: Any) -> tuple[list[str], list[Any]]:
    """One scalar subquery (and its value) per price of the language model."""
    table = _sql.table(LanguageModel)
    columns = [field.column for field in _price_fields()]
    sql = [f"(SELECT {column} FROM {table} WHERE id = %s)" for column in columns]
    return sql, [_sql.pk(LanguageModel, language_model_id)] * len(columns)


def _prices(values: Sequence[Any]) -> Prices:
    """The prices from the raw values of :func:`_prices_sql`, converted as the ORM would."""
    converted: dict[str, Decimal | None] = {}
    for name, model_field, value in zip(PRICE_FIELDS, _price_fields(), values, strict=True):
        column = model_field.get_col(LanguageModel._meta.db_table)
        converters = [
            *connection.ops.get_db_converters(column),
            *model_field.get_db_converters(connection),
        ]
        for converter in converters:
            value = converter(value, column, connection)
        converted[name] = value
    return Prices.from_fields(converted, currency=app_settings().CURRENCY)


def open_turn(run: Run) -> Opened:
    """Bump the conversation of ``run``, just inserted; read its budgets, the tool settings
    and the language model's prices.

    Call inside the transaction that inserted ``run``, right after the insert
    (the run row first, then the conversation, as recovery locks them).
    Raises ``Conversation.DoesNotExist`` when the conversation is gone.
    """
    now = timezone.now()
    conversation_table, setting_table = _sql.table(Conversation), _sql.table(ToolSetting)
    aggregate = (
        "json_agg(json_build_array(s.name, s.enabled, s.approval))"
        if connection.vendor == "postgresql"
        else "json_group_array(json_array(s.name, s.enabled, s.approval))"
    )
    profile = run.profile
    prices_sql, prices_params = _prices_sql(profile.language_model_id) if profile else ([], [])
    sql = (
        f"UPDATE {conversation_table} SET updated_at = %s WHERE id = %s"
        f" RETURNING {_budgets_apply_sql()},"
        f" (SELECT {aggregate} FROM {setting_table} s WHERE s.enabled = %s OR s.approval <> %s)"
        + "".join(f", {item}" for item in prices_sql)
    )
    params = [
        connection.ops.adapt_datetimefield_value(now),
        _sql.pk(Conversation, run.conversation_id),
        *[True, run.conversation.owner_id, run.profile_id],
        False,
        ApprovalPolicy.DEFAULT.value,
        *prices_params,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {run.conversation_id} does not exist")
    run.conversation.updated_at = now
    # PostgreSQL's driver decodes json (NULL over no rows); SQLite returns the text.
    settings = json.loads(row[1]) if isinstance(row[1], str | bytes) else row[1] or []
    return Opened(
        budgets_apply=bool(row[0]),
        tool_settings=ToolSettings.from_rows(
            (name, bool(enabled), approval) for name, enabled, approval in settings
        ),
        prices=_prices(row[2:]) if profile else Prices(currency=app_settings().CURRENCY),
    )


def _held(run: Run) -> tuple[str, list[Any]]:
    """The condition (and its values) of ``run``'s row while this process holds it."""
    return (
        "id = %s AND status = %s AND claimed_at = %s AND worker = %s",
        [
            _sql.pk(Run, run.pk),
            Run.Status.RUNNING,
            connection.ops.adapt_datetimefield_value(run.claimed_at),
            run.worker,
        ],
    )


def charge_run(
    run: Run, usage: Usage, *, rounds: int, cost: Decimal | None, touch: bool = False
) -> bool:
    """Add a model call to the run's counters, refresh its heartbeat: fenced, one ``UPDATE``;
    return the run's ``cancel_requested`` as that statement left it.

    ``rounds`` (0 or 1) is added to ``iterations``; ``cost`` to ``cost``, or
    ``None`` (the price is unknown) counts one more unpriced call. Raises
    :class:`RunFencedOut` (nothing written) when this process no longer holds
    ``run``. ``run`` is updated in memory to match. The flag comes back with
    the ``UPDATE`` (``RETURNING``): the loop learns of a cancellation asked
    for while the answer streamed without a statement of its own.

    ``touch``: also bump the conversation's ``updated_at`` (its row lock,
    taken after the run's, as ``hold_for_results`` takes them), for a caller
    that appends to it next. PostgreSQL does both in one statement (a
    data-modifying ``WITH``: the conversation is updated only when the run
    was); SQLite, without one, in a second statement.
    """
    if run.claimed_at is None:
        raise RunFencedOut(f"run {run.pk} is not claimed by this process")
    now = timezone.now()
    counts = [getattr(usage, name) for name in USAGE_FIELDS]
    assignments = [f"{name} = {name} + %s" for name in ("iterations", *USAGE_FIELDS)]
    assignments.append("heartbeat_at = %s")
    params: list[Any] = [rounds, *counts, connection.ops.adapt_datetimefield_value(now)]
    if cost is None:
        assignments.append("unpriced_calls = unpriced_calls + 1")
    else:
        # SQLite has no decimal type: the sum is NUMERIC, as the ORM casts it.
        assignments.append("cost = CAST(COALESCE(cost, 0) + CAST(%s AS NUMERIC) AS NUMERIC)")
        params.append(cost)
    where, held = _held(run)
    sql = (
        f"UPDATE {_sql.table(Run)} SET {', '.join(assignments)} WHERE {where}"
        " RETURNING cancel_requested"
    )
    params += held
    together = touch and connection.vendor == "postgresql"
    if together:
        conversation_table = _sql.table(Conversation)
        sql = (
            f"WITH charged AS ({sql}) UPDATE {conversation_table} SET updated_at = %s"
            f" FROM charged WHERE {conversation_table}.id = %s RETURNING charged.cancel_requested"
        )
        params += [
            connection.ops.adapt_datetimefield_value(now),
            _sql.pk(Conversation, run.conversation_id),
        ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise RunFencedOut(f"run {run.pk} is no longer held by this process")
    if touch:
        if not together:
            touch_conversation(run.conversation_id, now)
        run.conversation.updated_at = now
    run.iterations += rounds
    for name, count in zip(USAGE_FIELDS, counts, strict=True):
        setattr(run, name, getattr(run, name) + count)
    run.heartbeat_at = now
    if cost is None:
        run.unpriced_calls += 1
    else:
        run.cost = (run.cost or Decimal(0)) + cost
    run.cancel_requested = bool(row[0])
    return run.cancel_requested


def hold_for_results(run: Run, states: Sequence[ToolCallRow] = ()) -> Held:
    """Fence ``run``, bump its conversation's ``updated_at``; raise :class:`RunFencedOut` if not held.

    Call first inside the transaction that stores a turn's results. On
    PostgreSQL the same statement writes the call ``states`` as
    :func:`update_call_states` would, only when the run is held (then
    :attr:`Held.states_stored`); on SQLite the caller writes them.
    """
    if run.claimed_at is None:
        raise RunFencedOut(f"run {run.pk} is not claimed by this process")
    now = timezone.now()
    adapt = connection.ops.adapt_datetimefield_value
    run_table, conversation_table = _sql.table(Run), _sql.table(Conversation)
    run_id = _sql.pk(Run, run.pk)
    conversation_id = _sql.pk(Conversation, run.conversation_id)
    held = _held(run)
    budgets = [True, run.conversation.owner_id, run.profile_id]
    if connection.vendor == "postgresql":
        # A data-modifying WITH that the main statement does not read runs after it:
        # the rows are locked in the order run, conversation, calls.
        stored, stored_params = _call_states_sql(states, held_by="EXISTS (SELECT 1 FROM held)")
        sql = (
            f"WITH held AS (UPDATE {run_table} SET heartbeat_at = %s WHERE {held[0]}"
            " RETURNING cancel_requested)"
            + (f", stored AS ({stored})" if states else "")
            + f" UPDATE {conversation_table} SET updated_at = %s FROM held"
            f" WHERE {conversation_table}.id = %s"
            f" RETURNING held.cancel_requested, {_budgets_apply_sql()}"
        )
        params = [adapt(now), *held[1], *stored_params, adapt(now), conversation_id, *budgets]
    else:
        sql = (
            f"UPDATE {conversation_table} SET updated_at = %s WHERE id = %s"
            f" AND EXISTS (SELECT 1 FROM {run_table} WHERE {held[0]})"
            f" RETURNING (SELECT cancel_requested FROM {run_table} WHERE id = %s),"
            f" {_budgets_apply_sql()}"
        )
        params = [adapt(now), conversation_id, *held[1], run_id, *budgets]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise RunFencedOut(f"run {run.pk} is no longer held by this process")
    if connection.vendor == "postgresql":
        run.heartbeat_at = now
    run.conversation.updated_at = now
    return Held(
        cancel_requested=bool(row[0]),
        budgets_apply=bool(row[1]),
        states_stored=bool(states) and connection.vendor == "postgresql",
    )


def update_call_states(rows: Sequence[ToolCallRow]) -> None:
    """Write status, error and times of ``rows`` in one ``UPDATE ... FROM (VALUES ...)``.

    Both PostgreSQL and SQLite (3.33+) accept ``UPDATE ... FROM`` and name
    the columns of ``VALUES`` column1...; PostgreSQL needs the timestamps cast.
    """
    if not rows:
        return
    sql, params = _call_states_sql(rows)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _call_states_sql(rows: Sequence[ToolCallRow], held_by: str = "") -> tuple[str, list[Any]]:
    """The ``UPDATE`` of :func:`update_call_states` (and its values); ``held_by``: a further
    condition every row must meet."""
    if not rows:
        return "", []
    ops = connection.ops
    cast = "::timestamptz" if connection.vendor == "postgresql" else ""
    row_sql = f"(%s, %s, %s, %s{cast}, %s{cast})"
    params: list[Any] = []
    for row in rows:
        params += [
            row.pk,
            row.status,
            row.error,
            ops.adapt_datetimefield_value(row.started_at),
            ops.adapt_datetimefield_value(row.finished_at),
        ]
    table = _sql.table(ToolCallRow)
    sql = (
        f"UPDATE {table} SET status = v.column2, error = v.column3, "
        f"started_at = v.column4, finished_at = v.column5 "
        f"FROM (VALUES {', '.join([row_sql] * len(rows))}) AS v "
        f"WHERE {table}.id = v.column1"
    )
    if held_by:
        sql += f" AND {held_by}"
    return sql, params
