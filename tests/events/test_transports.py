"""Each transport of live events: delivery, fan-out, unsubscribing, failures.

The same scenarios run on the in-process bus, on Redis (a channel prefix of
this session's own, so nothing else on the server hears us) and on
PostgreSQL ``LISTEN``/``NOTIFY`` (the test database).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import pytest
from django.core.checks import run_checks
from django.db import connection
from django.test import override_settings

from conversations import events
from conversations.events.postgres_backend import MAX_PAYLOAD_BYTES, Reassembler, split_payload

pytestmark = pytest.mark.django_db

REDIS_URL = f"redis://127.0.0.1:6379/15?prefix=tests-{uuid.uuid4().hex[:8]}"


def redis_is_up() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url("redis://127.0.0.1:6379/15").ping())
    except redis.ConnectionError:
        return False


@pytest.fixture(params=["local", "redis", "postgres"])
def transport(request):
    """``EVENTS_URL`` set to each transport in turn; yields its name."""
    if request.param == "redis" and not redis_is_up():
        pytest.skip("Redis is not running on 127.0.0.1:6379")
    if request.param == "postgres" and connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://...")
    url = {"local": "", "redis": REDIS_URL, "postgres": "postgres"}[request.param]
    with override_settings(CONVERSATIONS={"EVENTS_URL": url}):
        yield request.param
    # Leaving the override closed the transport (its listener thread has stopped).


def run_id() -> str:
    return str(uuid.uuid4())


def test_a_published_event_reaches_the_subscriber(transport):
    run = run_id()
    with events.subscribe(run) as subscription:
        assert subscription.ready
        events.publish(run, "text.delta", {"seq": 1, "text": "Hel"})
        events.publish(run, events.CHANGED)
        first, second = subscription.get(5), subscription.get(5)
    assert first == events.LiveEvent(run, "text.delta", {"seq": 1, "text": "Hel"})
    assert second == events.LiveEvent(run, "changed", {})


def test_an_async_subscriber_gets_events_on_the_event_loop(transport):
    run = run_id()

    async def follow():
        subscription = await events.asubscribe(run)
        try:
            assert subscription.ready
            events.publish(run, "reasoning.delta", {"seq": 7, "text": "hmm"})
            got = await subscription.aget(5)
            nothing = await subscription.aget(0.05)
            return got, nothing
        finally:
            subscription.close()

    got, nothing = asyncio.run(follow())
    assert got == events.LiveEvent(run, "reasoning.delta", {"seq": 7, "text": "hmm"})
    assert nothing is None


def test_every_subscriber_of_a_run_gets_every_event_and_no_other_runs(transport):
    run, other = run_id(), run_id()
    with (
        events.subscribe(run) as one,
        events.subscribe(run) as two,
        events.subscribe(other) as elsewhere,
    ):
        for seq in range(1, 4):
            events.publish(run, "text.delta", {"seq": seq, "text": str(seq)})
        for subscription in (one, two):
            assert [subscription.get(5).data["seq"] for _ in range(3)] == [1, 2, 3]
        assert elsewhere.get(0.2) is None


def test_a_closed_subscription_receives_nothing_and_others_go_on(transport):
    run = run_id()
    stays = events.subscribe(run)
    leaves = events.subscribe(run)
    leaves.close()
    leaves.close()  # idempotent
    events.publish(run, "text.delta", {"seq": 1, "text": "x"})
    assert stays.get(5).data == {"seq": 1, "text": "x"}
    assert leaves.get(0.2) is None
    stays.close()
    # The run's last subscription gone, a new one listens again from scratch.
    with events.subscribe(run) as again:
        events.publish(run, "text.delta", {"seq": 2, "text": "y"})
        assert again.get(5).data["seq"] == 2
    assert run not in events.backend().hub.runs()  # type: ignore[attr-defined]


def test_large_events_arrive_whole(transport):
    run = run_id()
    arguments = "é€𝄞 " * 4000  # about 36 kB of UTF-8, characters of 2 to 4 bytes
    with events.subscribe(run) as subscription:
        events.publish(run, "tool_call.delta", {"seq": 1, "index": 0, "arguments": arguments})
        events.publish(run, "text.delta", {"seq": 2, "text": "after"})
        big, small = subscription.get(5), subscription.get(5)
    assert big.data["arguments"] == arguments
    assert small.data["text"] == "after"


def test_a_payload_is_split_on_character_boundaries_and_put_back_together():
    payload = "x" + "é" * 9000
    pieces = split_payload(payload, limit=MAX_PAYLOAD_BYTES)
    assert len(pieces) == 3
    assert all(len(piece.encode()) <= MAX_PAYLOAD_BYTES for piece in pieces)
    assembler = Reassembler()
    assert [assembler.add(piece) for piece in reversed(pieces[1:])] == [None, None]
    assert assembler.add(pieces[0]) == payload
    assert split_payload("small") == ["small"]
    assert assembler.add("~not:a:piece") is None


def test_publishing_to_an_unreachable_redis_is_logged_not_raised(caplog):
    run = run_id()
    with (
        override_settings(CONVERSATIONS={"EVENTS_URL": "redis://127.0.0.1:9/0"}),
        caplog.at_level(logging.WARNING, logger="conversations.events"),
    ):
        events.publish(run, "text.delta", {"seq": 1, "text": "lost"})
        events.publish(run, "text.delta", {"seq": 2, "text": "dropped at once"})
    failures = [r for r in caplog.records if "publishing text.delta" in r.getMessage()]
    assert len(failures) == 1  # the second was dropped without trying again
    assert run in failures[0].getMessage()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_listener_and_publisher_recover_from_a_lost_connection(caplog):
    run = run_id()
    with (
        override_settings(CONVERSATIONS={"EVENTS_URL": "postgres"}),
        events.subscribe(run) as subscription,
    ):
        events.publish(run, "text.delta", {"seq": 1, "text": "before"})
        assert subscription.get(5).data["seq"] == 1
        with connection.cursor() as cursor:  # every other session of this database
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        with caplog.at_level(logging.WARNING, logger="conversations.events"):
            events.publish(run, "text.delta", {"seq": 2, "text": "lost"})  # logged
            received = None
            deadline = time.monotonic() + 15
            while received is None and time.monotonic() < deadline:
                time.sleep(0.3)  # past the pause after a failed publish
                events.publish(run, "text.delta", {"seq": 3, "text": "after"})
                received = subscription.get(0.5)
        assert received is not None and received.data["seq"] == 3
        assert any("publishing text.delta" in r.getMessage() for r in caplog.records)


def test_unknown_transports_are_a_clear_configuration_error():
    with override_settings(CONVERSATIONS={"EVENTS_URL": "amqp://broker"}):
        errors = [m for m in run_checks() if m.id == "conversations.E012"]
    assert len(errors) == 1
    assert "'amqp://broker' names no known transport" in errors[0].msg
    for good in ("", "postgres", "redis://127.0.0.1:6379/0", "rediss://cache:6380/1"):
        with override_settings(CONVERSATIONS={"EVENTS_URL": good}):
            assert not [m for m in run_checks() if m.id.startswith("conversations.E01")], good
    with override_settings(CONVERSATIONS={"EVENTS_URL": 5}):
        assert [m.id for m in run_checks() if m.id == "conversations.E012"] == [
            "conversations.E012"
        ]
