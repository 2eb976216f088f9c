"""Live deltas on the run event stream: the snapshot, deltas without ids, resuming, POST.

The deltas are published here the way the tool loop publishes them (the
snapshot first, then the delta), by the test itself or by a scripted model
answer that publishes while it "streams". Persisted events come from the
rows as ever; ``changed`` makes the stream read them at once.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from django.test import AsyncClient, Client
from django.urls import reverse
from django.utils import timezone

from conversations import events
from conversations.api.sse.views import STRIDE, RunEventStream
from conversations.domain import ChatMessage
from conversations.models import Run
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import append_messages, execute_run
from conversations.services.loop.runs import claim_run, start_run

pytestmark = pytest.mark.django_db


def parse(raw: bytes) -> list[dict]:
    """Server-Sent Events as dicts; ``id`` is ``None`` for events sent without one."""
    found = []
    for block in raw.decode().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        if "event" in fields:
            event_id = int(fields["id"]) if "id" in fields else None
            found.append(
                {"id": event_id, "event": fields["event"], "data": json.loads(fields["data"])}
            )
    return found


def snapshot(seq: int, text: str) -> dict:
    return {"seq": seq, "text": text, "reasoning": "", "tool_calls": []}


def stream_delta(run_id, seq: int, text: str, so_far: str) -> None:
    """What the loop does for one text delta: the snapshot first, then the event."""
    events.set_inflight(run_id, snapshot(seq, so_far))
    events.publish(run_id, "text.delta", {"seq": seq, "text": text})


def end(run) -> None:
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED, finished_at=timezone.now())
    events.publish(run.pk, events.CHANGED)


class NotifiedOnly(RunEventStream):
    """Reads the rows only when ``changed`` says so (no periodic read within the test)."""

    poll_seconds = 3600.0
    keepalive_seconds = 3600.0


@pytest.fixture
def running(demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi")
    claim_run(run=run)  # "a process executes it"
    yield run
    events.clear_inflight(run.pk)


def test_the_snapshot_comes_first_then_only_newer_deltas_without_ids(running):
    stream_delta(running.pk, 1, "He", "He")
    stream_delta(running.pk, 2, "l", "Hel")  # nobody listened yet: only in the snapshot
    stream = NotifiedOnly(running.pk)
    chunks = stream.iter_sync(stream.poll())
    assert next(chunks).startswith(b"retry:")
    assert [e["event"] for e in parse(next(chunks))] == ["run_started"]
    opening = next(chunks)  # subscribed, read the rows again, then the snapshot
    assert opening.startswith(b"event: inflight\n")  # no id line
    assert parse(opening) == [{"id": None, "event": "inflight", "data": snapshot(2, "Hel")}]

    events.publish(running.pk, "text.delta", {"seq": 2, "text": "l"})  # already in it
    stream_delta(running.pk, 3, "lo", "Hello")
    stream_delta(running.pk, 4, " wo", "Hello wo")
    third, fourth = next(chunks), next(chunks)
    assert third == b'event: text.delta\ndata: {"seq":3,"text":"lo"}\n\n'
    assert parse(fourth) == [{"id": None, "event": "text.delta", "data": {"seq": 4, "text": " wo"}}]

    end(running)  # only the notification can wake this stream
    assert [e["event"] for e in parse(b"".join(chunks))] == ["run_finished"]
    assert stream.finished


def test_a_lost_delta_makes_the_stream_send_the_snapshot_again(running):
    stream_delta(running.pk, 1, "a", "a")
    stream = NotifiedOnly(running.pk)
    chunks = stream.iter_sync(stream.poll())
    next(chunks), next(chunks)  # retry, run_started
    assert parse(next(chunks))[0]["data"] == snapshot(1, "a")
    stream_delta(running.pk, 2, "b", "ab")
    assert parse(next(chunks))[0]["data"] == {"seq": 2, "text": "b"}
    events.set_inflight(running.pk, snapshot(3, "abc"))  # delta 3 never arrives
    stream_delta(running.pk, 4, "d", "abcd")
    assert parse(next(chunks)) == [{"id": None, "event": "inflight", "data": snapshot(4, "abcd")}]
    stream_delta(running.pk, 5, "e", "abcde")
    assert parse(next(chunks))[0]["data"]["seq"] == 5
    chunks.close()


def store_answer(run, text: str, last_seq: int) -> None:
    """What the loop does when an answer's stream ends: its last seq, no snapshot, the turn."""
    events.set_streamed_seq(run.pk, last_seq)
    events.clear_inflight(run.pk)
    append_messages(conversation=run.conversation, messages=[ChatMessage.assistant(text)], run=run)
    events.publish(run.pk, events.CHANGED)


def test_a_delta_arriving_after_its_stored_turn_was_sent_is_dropped(running):
    events.set_inflight(running.pk, snapshot(0, ""))  # an answer has begun
    stream = NotifiedOnly(running.pk)
    chunks = stream.iter_sync(stream.poll())
    next(chunks), next(chunks), next(chunks)  # retry, run_started, inflight
    stream_delta(running.pk, 1, "He", "He")
    assert parse(next(chunks))[0]["data"] == {"seq": 1, "text": "He"}

    # Delta 2 was published before the turn was stored, but reaches this
    # stream only after its read of the rows has sent that turn (a transport
    # between processes delivering late, or a periodic read of the rows
    # coming first): the page would draw the answer a second time.
    store_answer(running, "Hello", last_seq=2)
    (turn,) = parse(next(chunks))
    assert (turn["event"], turn["data"]["message"]["content"]) == ("assistant_turn", "Hello")
    events.publish(running.pk, "text.delta", {"seq": 2, "text": "llo"})
    events.set_inflight(running.pk, snapshot(3, "Next"))
    events.publish(running.pk, "text.delta", {"seq": 3, "text": "Next"})  # the next answer's
    assert parse(next(chunks)) == [
        {"id": None, "event": "text.delta", "data": {"seq": 3, "text": "Next"}}
    ]
    end(running)
    assert [e["event"] for e in parse(b"".join(chunks))] == ["run_finished"]


def test_a_stream_opened_after_a_stored_turn_drops_that_answers_late_deltas(running):
    store_answer(running, "Hello", last_seq=5)
    stream = NotifiedOnly(running.pk)
    chunks = stream.iter_sync()
    next(chunks)  # retry
    assert [e["event"] for e in parse(next(chunks))] == ["run_started", "assistant_turn"]
    events.publish(running.pk, "text.delta", {"seq": 5, "text": "lo"})
    events.set_inflight(running.pk, snapshot(6, "And"))
    events.publish(running.pk, "text.delta", {"seq": 6, "text": "And"})
    assert parse(next(chunks))[0]["data"] == {"seq": 6, "text": "And"}
    chunks.close()


def test_reasoning_and_tool_call_deltas_are_relayed_by_name(running):
    events.set_inflight(running.pk, snapshot(0, ""))  # an answer has begun
    stream = NotifiedOnly(running.pk)
    chunks = stream.iter_sync(stream.poll())
    next(chunks), next(chunks), next(chunks)  # retry, run_started, inflight
    call = {"seq": 1, "index": 0, "id": "call_1", "name": "add", "arguments": '{"a"'}
    events.publish(running.pk, "tool_call.delta", call)
    events.publish(running.pk, "reasoning.delta", {"seq": 2, "text": "so"})
    events.publish(running.pk, "something.else", {"seq": 3})  # not ours to relay
    end(running)
    rest = parse(b"".join(chunks))
    assert [(e["event"], e["id"]) for e in rest] == [
        ("tool_call.delta", None),
        ("reasoning.delta", None),
        ("run_finished", STRIDE - 1),
    ]
    assert rest[0]["data"] == call


# Here and below, another thread writes while the stream reads: on SQLite the two
# contend for the one database lock, so these need PostgreSQL.
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_under_asgi_deltas_arrive_while_the_stream_waits_on_the_event_loop(user, running):
    client = AsyncClient()
    client.force_login(user)

    subscribed = []
    # The run ends once the client has the deltas: a stream that sees the run
    # ended stops (the stored answer supersedes what was still in flight).
    relayed = threading.Event()

    def publisher():
        deadline = time.monotonic() + 60
        while str(running.pk) not in events.backend().hub.runs() and time.monotonic() < deadline:
            time.sleep(0.01)
        subscribed.append(str(running.pk) in events.backend().hub.runs())
        for seq, text in enumerate(["one", " two", " three"], start=1):
            events.publish(running.pk, "text.delta", {"seq": seq, "text": text})
        relayed.wait(20)
        end(running)
        connections.close_all()

    async def fetch():
        response = await client.get(reverse("conversations:run-events", args=[running.pk]))
        assert response.is_async
        chunks = []
        async for chunk in response.streaming_content:
            chunks.append(chunk)
            if b"".join(chunks).count(b"event: text.delta") == 3:
                relayed.set()
        return b"".join(chunks)

    thread = threading.Thread(target=publisher)
    thread.start()
    try:
        received = parse(async_to_sync(fetch)())
    finally:
        thread.join(10)
    assert subscribed == [True], "the stream never subscribed"
    assert [e["event"] for e in received] == [
        "run_started",
        "text.delta",
        "text.delta",
        "text.delta",
        "run_finished",
    ]
    assert "".join(e["data"]["text"] for e in received[1:4]) == "one two three"


# Resuming a stream -------------------------------------------------------------------------------


class Reader:
    """Reads the events of a streaming response as they come."""

    def __init__(self, response):
        self.response = response
        self.chunks = iter(response.streaming_content)
        self.pending: list[dict] = []

    def until(self, done) -> list[dict]:
        """Events up to the first one for which ``done(event)`` is true."""
        received, buffer = [], b""
        while True:
            while self.pending:
                received.append(self.pending.pop(0))
                if done(received[-1]):
                    return received
            buffer += next(self.chunks)
            *blocks, buffer = buffer.split(b"\n\n")
            for block in blocks:
                self.pending.extend(parse(block + b"\n\n"))

    def hang_up(self) -> None:
        self.response.close()


def text_of(received: list[dict]) -> str:
    """What a client shows of the answer: the last snapshot plus the deltas after it."""
    text = ""
    for event in received:
        if event["event"] == "inflight":
            text = event["data"]["text"]
        elif event["event"] == "text.delta":
            text += event["data"]["text"]
    return text


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_client_that_reconnects_gets_the_same_text_from_snapshot_and_later_deltas(
    user, demo_conversation
):
    tokens = [f"w{i} " for i in range(20)]
    whole = "".join(tokens)
    resume = threading.Event()

    def streaming_model(messages, tools, options):
        run = Run.objects.get(conversation=demo_conversation, status=Run.Status.RUNNING)
        for seq, token in enumerate(tokens, start=1):
            if seq == 11:  # half-way: wait until the client is back
                assert resume.wait(10)
            stream_delta(run.pk, seq, token, "".join(tokens[:seq]))
        return scripted_text(whole)

    run = start_run(conversation=demo_conversation, content="count", provider=ScriptedProvider())
    worker = threading.Thread(
        target=lambda: (
            execute_run(run=run, provider=ScriptedProvider([streaming_model])),
            connections.close_all(),
        )
    )
    client = Client()
    client.force_login(user)
    url = reverse("conversations:run-events", args=[run.pk])

    first = client.get(url)
    assert first.status_code == 200
    worker.start()
    try:
        reader = Reader(first)
        before = reader.until(lambda e: e["event"] == "text.delta" and e["data"]["seq"] == 4)
        reader.hang_up()
        last_id = [e["id"] for e in before if e["id"] is not None][-1]
        assert last_id == 0  # run_started (the user message is at position 0)

        second = Reader(client.get(url, headers={"Last-Event-ID": str(last_id)}))
        after = second.until(lambda e: e["event"] == "inflight")
        assert after[-1]["data"]["seq"] == 10
        resume.set()
        after.extend(second.until(lambda e: e["event"] == "run_finished"))
    finally:
        resume.set()
        worker.join(20)

    assert text_of(after) == whole  # the snapshot, then deltas 11 to 20
    assert [e["data"]["seq"] for e in after if e["event"] == "text.delta"] == list(range(11, 21))
    assert text_of(before) == "".join(tokens[:4])
    turns = [e for e in after if e["event"] == "assistant_turn"]
    assert turns[-1]["data"]["message"]["content"] == whole
    assert all(e["id"] is None or e["id"] > last_id for e in after)


def test_an_agents_events_are_relayed_as_they_come_without_ids(running):
    events.set_inflight(running.pk, snapshot(0, ""))
    stream = NotifiedOnly(running.pk)
    chunks = stream.iter_sync(stream.poll())
    next(chunks), next(chunks), next(chunks)  # retry, run_started, inflight
    started = {"run": "agent-run", "conversation": "c", "profile": "helper", "call_id": "k"}
    events.publish(running.pk, "agent.started", started)
    # An agent's deltas carry its own seq: they neither skip nor repeat the run's.
    events.publish(running.pk, "agent.text.delta", {"run": "agent-run", "seq": 7, "text": "Hi"})
    events.publish(running.pk, "agent.finished", {**started, "status": "completed"})
    end(running)
    rest = parse(b"".join(chunks))
    assert [(e["event"], e["id"]) for e in rest] == [
        ("agent.started", None),
        ("agent.text.delta", None),
        ("agent.finished", None),
        ("run_finished", STRIDE - 1),
    ]
    assert rest[1]["data"] == {"run": "agent-run", "seq": 7, "text": "Hi"}
