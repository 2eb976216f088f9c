"""The rule-8 triggers read the last turn through an index: the same rows at 10 calls or 10,000.

On PostgreSQL the proof is the rows the insert of one user message visits in
the message and call tables (``pg_stat_xact_user_tables``: sequential rows
read plus index rows fetched, this transaction only), triggers included. On
SQLite, the plan of the trigger's lookup of the last turn is an index search.
"""

from __future__ import annotations

import pytest
from django.db import connection

from conversations.models import Message, ToolCall

pytestmark = pytest.mark.django_db

TABLES = ("conversations_message", "conversations_toolcall")


def history_with_calls(conversation, calls: int, per_turn: int = 100) -> int:
    """A user message, then turns of up to ``per_turn`` answered calls; the next position."""
    position = 0
    Message.objects.create(conversation=conversation, position=position, role="user")
    made = 0
    while made < calls:
        count = min(per_turn, calls - made)
        position += 1
        assistant = Message.objects.create(
            conversation=conversation, position=position, role="assistant"
        )
        rows = ToolCall.objects.bulk_create(
            ToolCall(
                message=assistant,
                conversation=conversation,
                index=i,
                call_id=f"call_{made + i}",
                name="get_weather",
            )
            for i in range(count)
        )
        Message.objects.bulk_create(
            Message(
                conversation=conversation,
                position=position + 1 + i,
                role="tool",
                tool_call=row,
                content="ok",
            )
            for i, row in enumerate(rows)
        )
        position += count
        made += count
    return position + 1


def rows_visited() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)), 0)"
            " FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)",
            [list(TABLES)],
        )
        return int(cursor.fetchone()[0])


def cost_of_a_user_message(conversation, calls: int) -> int:
    position = history_with_calls(conversation, calls)
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"ANALYZE {table}")  # as autovacuum would; plans use real sizes
    before = rows_visited()
    Message.objects.create(conversation=conversation, position=position, role="user")
    return rows_visited() - before


@pytest.mark.postgres
def test_a_user_message_visits_the_last_turn_only_at_10_or_10000_calls(
    conversation, other_conversation
):
    # At 10 calls the tables are tiny and may be read whole (a few dozen rows).
    small = cost_of_a_user_message(conversation, 10)
    large = cost_of_a_user_message(other_conversation, 10_000)
    # The last turn's calls (100 here) and their answers are read, nothing more:
    # the old trigger read every one of the 10,000 calls.
    assert small <= 100 and large <= 2 * 100 + 10, (small, large)


def test_sqlite_finds_the_last_turn_through_the_partial_index(db):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's query planner")
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN QUERY PLAN SELECT l.id FROM conversations_message l"
            " WHERE l.conversation_id = %s AND l.\"position\" < %s AND NOT (l.role = 'tool')"
            ' ORDER BY l."position" DESC LIMIT 1',
            ["x", 5],
        )
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "USING INDEX conversations_message_turn_idx" in plan, plan
