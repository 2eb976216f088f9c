"""``_sql.insert`` stores what ``bulk_create`` stores, and leaves the instances as it does.

The loop inserts a turn's message, its calls, the ledger row and the answers
through ``conversations.services._sql.insert``: the ORM's multi-row insert with
its statement built once per model and row count. Each test runs the same
rows both ways and compares what the database holds, column by column (read
as stored: SQLite's ``quote()`` literal, PostgreSQL's typed value), leaving
out only what differs by construction (keys and creation times).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
from django.db.models.signals import post_save
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.models import Message, ModelCall, Run, ToolCall
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop
from conversations.services._sql import _columns, insert
from conversations.tools import registry, tool

pytestmark = pytest.mark.django_db

LEFT_OUT = {"id", "created_at", "message_id", "tool_call_id", "conversation_id", "run_id"}
"""Columns that differ between the two sides by construction (or point at such rows)."""


def stored(model: type[Model], keys: Sequence[Any]) -> list[dict[str, Any]]:
    """The rows of ``model`` with these keys, in this order, each column as stored."""
    quote, sqlite = connection.ops.quote_name, connection.vendor == "sqlite"
    table = model._meta.db_table
    with connection.cursor() as cursor:
        names = [c.name for c in connection.introspection.get_table_description(cursor, table)]
        read = "quote({})" if sqlite else "{}"
        columns = ", ".join(read.format(quote(name)) for name in names)
        found = {}
        for key in keys:
            cursor.execute(f"SELECT {columns} FROM {quote(table)} WHERE id = %s", [key])
            (row,) = cursor.fetchall()
            found[key] = {n: v if sqlite else repr(v) for n, v in zip(names, row, strict=True)}
    return [{n: v for n, v in found[key].items() if n not in LEFT_OUT} for key in keys]


def turn(conversation: Any, run: Run | None, start: int) -> list[Message]:
    """An assistant message with every optional column set, then a plain user message."""
    return [
        Message(
            conversation=conversation,
            position=start,
            role="assistant",
            content="Ça va? \u2603 'quoted' \"and\" %s",
            run=run,
            model="m-1",
            finish_reason="tool_calls",
            prompt_tokens=12,
            completion_tokens=3,
            total_tokens=15,
            cached_prompt_tokens=2,
            reasoning_tokens=1,
            usage_estimated=True,
            latency_ms=42,
            provider_metadata={"nested": {"list": [1, 2.5, None, "x"]}, "flag": True},
            is_error=False,
        ),
        Message(conversation=conversation, position=start + 1, role="user", content=""),
    ]


def calls(message: Message, started: Any) -> list[ToolCall]:
    return [
        ToolCall(
            message=message,
            conversation=message.conversation,
            index=index,
            call_id=f"call-{message.position}-{index}",
            name="echo",
            arguments={"text": f"é{index}", "n": index, "deep": {"a": [index]}},
            raw_arguments=None if index else '{"text": "é0"}',
            status="running" if index else "pending",
            started_at=started if index else None,
        )
        for index in range(3)
    ]


def both_ways(make: Callable[[Any], list[Model]], one: Any, other: Any) -> tuple[list, list]:
    """``make(conversation)``'s rows inserted by ``bulk_create`` in one, by ``insert`` in other."""
    orm, ours = make(one), make(other)
    type(orm[0])._default_manager.bulk_create(orm)
    insert(ours)
    return orm, ours


def test_messages_and_calls_are_stored_as_bulk_create_stores_them(conversation, other_conversation):
    runs = {
        c.pk: Run.objects.create(conversation=c, max_iterations=3)
        for c in (conversation, other_conversation)
    }
    started = timezone.now() - timedelta(seconds=3)
    orm, ours = both_ways(lambda c: turn(c, runs[c.pk], 0)[:1], conversation, other_conversation)
    assert stored(Message, [m.pk for m in ours]) == stored(Message, [m.pk for m in orm])
    orm_calls, our_calls = both_ways(
        lambda c: calls((orm + ours)[c is other_conversation], started),
        conversation,
        other_conversation,
    )
    assert stored(ToolCall, [c.pk for c in our_calls]) == stored(
        ToolCall, [c.pk for c in orm_calls]
    )
    assert [c.message_id for c in our_calls] == [ours[0].pk] * 3
    assert ToolCall.objects.filter(message=ours[0]).count() == 3
    answers = both_ways(
        lambda c: [
            Message(
                conversation=c,
                position=1 + i,
                role="tool",
                content=f"r{i}",
                tool_call=call,
                run=runs[c.pk],
            )
            for i, call in enumerate((orm_calls, our_calls)[c is other_conversation])
        ],
        conversation,
        other_conversation,
    )
    assert stored(Message, [m.pk for m in answers[1]]) == stored(
        Message, [m.pk for m in answers[0]]
    )
    assert [m.tool_call_id for m in answers[1]] == [c.pk for c in our_calls]


def test_the_instances_come_back_saved_with_their_keys(conversation, other_conversation):
    orm, ours = both_ways(lambda c: turn(c, None, 0), conversation, other_conversation)
    for obj in ours:
        assert obj.pk is not None and obj._state.adding is False
        assert obj._state.db == connection.alias
    assert [m.pk for m in ours] == list(
        Message.objects.filter(conversation=other_conversation)
        .order_by("position")
        .values_list("pk", flat=True)
    )
    assert [(m.created_at is None) for m in ours] == [(m.created_at is None) for m in orm]
    assert ours[0].created_at >= orm[0].created_at


def test_each_insert_is_one_statement_and_its_text_is_kept(conversation):
    with CaptureQueriesContext(connection) as first:
        insert(turn(conversation, None, 0))
    with CaptureQueriesContext(connection) as second:
        insert(turn(conversation, None, 2))
    assert len(first.captured_queries) == len(second.captured_queries) == 1
    assert "RETURNING" in first.captured_queries[0]["sql"]
    if connection.vendor == "postgresql":  # one array per column, as Django's own insert
        assert "UNNEST" in first.captured_queries[0]["sql"]
    with CaptureQueriesContext(connection) as one_row:
        insert(turn(conversation, None, 4)[:1])
    assert len(one_row.captured_queries) == 1
    assert Message.objects.filter(conversation=conversation).count() == 5


def test_an_unsaved_message_is_refused_for_its_calls_as_bulk_create_refuses(conversation):
    unsaved = turn(conversation, None, 0)[0]
    with pytest.raises(ValueError) as theirs:
        ToolCall.objects.bulk_create(calls(unsaved, None))
    with pytest.raises(ValueError) as mine:
        insert(calls(unsaved, None))
    assert str(mine.value) == str(theirs.value)
    assert not ToolCall.objects.exists()


def test_a_message_saved_after_its_calls_were_made_gives_them_its_key(conversation):
    message = turn(conversation, None, 0)[0]
    made = calls(message, None)  # message_id is None: the message had no key yet
    insert([message])
    insert(made)
    assert {c.message_id for c in made} == {message.pk}
    assert set(ToolCall.objects.values_list("message_id", flat=True)) == {message.pk}


def test_a_row_whose_key_is_set_is_inserted_with_that_key(conversation):
    row = turn(conversation, None, 0)[1]
    row.pk = 987654
    insert([row])
    assert Message.objects.get(pk=987654).conversation_id == conversation.pk


def test_the_ledger_row_is_stored_and_saved_with_signals_when_something_listens(conversation):
    seen: list[tuple[int, bool]] = []

    def listen(sender: Any, instance: ModelCall, created: bool, **kwargs: Any) -> None:
        seen.append((instance.pk, created))

    def loop() -> Run:
        provider = ScriptedProvider(
            [lambda *a: scripted_calls(("echo", {"text": "hi"})), lambda *a: scripted_text("ok")]
        )
        return run_tool_loop(
            conversation=conversation, content="Go.", provider=provider, max_iterations=3
        )

    with registry.isolated(empty=True) as tools:
        tool(registry=tools)(echo)
        quiet = loop()
        post_save.connect(listen, sender=ModelCall)
        try:
            heard = loop()
        finally:
            post_save.disconnect(listen, sender=ModelCall)
    assert quiet.status == heard.status == "completed"
    assert seen == [(c.pk, True) for c in ModelCall.objects.filter(run=heard).order_by("pk")]
    assert len(seen) == 2
    for run in (quiet, heard):
        rows = ModelCall.objects.filter(run=run).order_by("pk")
        assert [r.message_id is not None for r in rows] == [True, True]
        assert [r.status for r in rows] == ["ok", "ok"]
        assert all(r.cost is None or isinstance(r.cost, Decimal) for r in rows)


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def test_each_plain_value_is_sent_as_the_fields_own_preparation_sends_it(conversation):
    """The values sent without the field's preparation are exactly what it returns."""
    sent: list[Any] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "UNNEST" in sql:  # PostgreSQL's rows as one array per column: back to rows
            sent.extend(value for row in zip(*params, strict=True) for value in row)
        else:
            sent.extend(params)
        return execute(sql, params, many, context)

    message = turn(conversation, None, 0)[0]
    message.role = "assistant"  # a plain str, not the choices' member
    made = [message]
    with connection.execute_wrapper(capture):
        insert(made)
    made_calls = calls(message, None)
    with connection.execute_wrapper(capture):
        insert(made_calls)
    checked = 0
    for obj in [*made, *made_calls]:
        for field, plain, _adapt in _columns(type(obj))[0]:
            value = sent.pop(0)
            if plain is None:
                continue
            expected = field.get_db_prep_save(getattr(obj, field.attname), connection)
            assert (type(value), value) == (type(expected), expected), field.name
            checked += 1
    assert sent == []
    assert checked >= 20
