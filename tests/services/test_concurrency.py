"""Concurrent appends on PostgreSQL: real threads, real connections, real row locks."""

from __future__ import annotations

import threading

import pytest
from django.db import IntegrityError, connection, transaction

from conversations.domain import ChatMessage
from conversations.models import Conversation, Message
from conversations.services import append_messages, create_conversation

from ..models import sql

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 4
APPENDS = 15


def run_in_threads(target, count):
    """Start ``count`` threads at the same moment; re-raise the first error."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(n):
        try:
            barrier.wait()
            target(n)
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]


def test_concurrent_appends_get_gapless_unique_positions(django_user_model):
    owner = django_user_model.objects.create(username="alice")
    conversation = create_conversation(owner=owner)

    def writer(n):
        target = Conversation.objects.get(pk=conversation.pk)
        for i in range(APPENDS):
            batch = [ChatMessage.user(f"{n}:{i}")]
            if i % 3 == 0:
                batch.append(ChatMessage.assistant(f"{n}:{i} answer"))
            append_messages(conversation=target, messages=batch)

    run_in_threads(writer, THREADS)

    rows = list(
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .values_list("position", "content")
    )
    expected = THREADS * (APPENDS + len(range(0, APPENDS, 3)))
    assert [position for position, _ in rows] == list(range(expected))
    # Each writer's messages keep their order, and a batch stays contiguous.
    contents = [content for _, content in rows]
    for n in range(THREADS):
        mine = [c for c in contents if c.startswith(f"{n}:") and not c.endswith("answer")]
        assert mine == [f"{n}:{i}" for i in range(APPENDS)]
        for i in range(0, APPENDS, 3):
            first = contents.index(f"{n}:{i}")
            assert contents[first + 1] == f"{n}:{i} answer"


def test_the_trigger_lock_closes_the_orphan_race(django_user_model):
    """A raw writer adding a call and another adding a user message cannot both win.

    Without the lock each transaction checks before the other commits and both
    succeed, leaving an unanswered call followed by a user message.
    """
    owner = django_user_model.objects.create(username="alice")
    conversation = create_conversation(owner=owner)
    (assistant,) = append_messages(conversation=conversation, messages=[ChatMessage.user("Hi")])
    (assistant,) = append_messages(
        conversation=conversation, messages=[ChatMessage.assistant("Let me check.")]
    )
    both_inside = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def writer(n):
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")  # open the transaction
                both_inside.wait()
                if n == 0:
                    sql.insert(
                        Message,
                        conversation_id=conversation.pk,
                        position=2,
                        role="user",
                        content="Hello?",
                    )
                else:
                    from conversations.models import ToolCall

                    sql.insert(
                        ToolCall,
                        message_id=assistant.pk,
                        conversation_id=conversation.pk,
                        index=0,
                        call_id="late",
                        name="get_weather",
                    )
            outcomes[str(n)] = "committed"
        except IntegrityError as exc:
            outcomes[str(n)] = str(exc)

    run_in_threads(writer, 2)
    assert sorted(outcomes.values()).count("committed") == 1, outcomes
    refused = next(value for value in outcomes.values() if value != "committed")
    assert "no_orphans" in refused
