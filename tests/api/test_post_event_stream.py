"""Posting a message with ``Accept: text/event-stream``: the answer is the run's events.

The request starts the run (every refusal is the usual JSON answer) and the
response relays its events while a thread of the process (``inline``) or a
worker (``celery``) executes it. Without the header nothing changes.
"""

from __future__ import annotations

import threading

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations import events
from conversations.domain import CompletionResponse
from conversations.models import Conversation, Run
from conversations.providers.demo import DemoProvider
from conversations.services.loop.runs import start_run

from .test_event_deltas import parse

SSE = "text/event-stream"


def messages_url(conversation):
    return reverse("conversations:conversation-messages", args=[conversation.pk])


@pytest.fixture
def client(user):
    client = Client()
    client.force_login(user)
    return client


def post(client, conversation, content, accept=SSE):
    return client.post(
        messages_url(conversation),
        {"content": content},
        content_type="application/json",
        headers={"Accept": accept},
    )


def read_events(response):
    """The events of a streamed answer, once the run's thread has ended."""
    try:
        assert response.status_code == 200
        assert response["Content-Type"] == "text/event-stream; charset=utf-8"
        return parse(b"".join(response.streaming_content))
    finally:
        wait_for_background_runs()


def wait_for_background_runs():
    for thread in threading.enumerate():
        if thread.name.startswith("conversations-run-"):
            thread.join(20)


class Pace:
    """What the client has received so far; the demo model waits on it (see the fixture)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._opened = False
        self._seq = 0  # the highest delta ``seq`` received
        self.published = 0  # deltas the model has handed to the run so far (seq counts them)

    def received(self, chunk: bytes) -> list[dict]:
        found = parse(chunk)
        with self._changed:
            for event in found:
                self._opened = True  # the opening batch is out: the snapshot was read
                if isinstance(event["data"].get("seq"), int):
                    self._seq = max(self._seq, event["data"]["seq"])
            self._changed.notify_all()
        return found

    def wait_until_received(self, seq: int) -> None:
        with self._changed:
            reached = self._changed.wait_for(lambda: self._opened and self._seq >= seq, 20)
        assert reached, f"the client never received delta {seq} (it has {self._seq})"


# The run's thread writes while the response reads: on SQLite the two contend for
# the one database lock, which makes such a test unreliable there.
@pytest.fixture
def paced_by_the_client(monkeypatch):
    """The demo model streams in step with what the client of the response has received.

    Deltas are published, never stored, and a stream relays one only while
    the run's rows it has read do not yet hold that answer. Three races would
    otherwise lose them: the run streaming before the response subscribed
    (nothing to relay); a delta published before the response read the
    in-flight snapshot (it arrives inside that snapshot, as ``inflight``); and
    a read of the rows, woken by ``changed`` or by the poll timer, that
    already sees the answer stored, or the whole run finished, while its
    deltas still wait in the subscription (then the stream ends, or sends the
    stored answer first). So the model starts once the client has the opening
    batch, and hands over each whole answer only once the client has received
    its last delta: the answer is stored after its deltas were relayed.
    """
    pace = Pace()
    stream = DemoProvider.stream

    def paced(self, *args, **kwargs):
        pace.wait_until_received(0)
        for item in stream(self, *args, **kwargs):
            if isinstance(item, CompletionResponse):
                pace.wait_until_received(pace.published)
            else:
                pace.published += 1
            yield item

    monkeypatch.setattr(DemoProvider, "stream", paced)
    return pace


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_answer_is_the_whole_run_as_it_executes(client, demo_conversation, paced_by_the_client):
    response = post(client, demo_conversation, '/call calculate {"expression": "6*7"}')
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    try:
        received = [
            e for chunk in response.streaming_content for e in paced_by_the_client.received(chunk)
        ]
    finally:
        wait_for_background_runs()
    # The demo model streams: its pieces arrive as deltas (no ids), each in its place
    # between the stored events, one by one (``seq`` 1, 2, ...), none folded into a snapshot.
    kinds = [e["event"] for e in received]
    assert [kind for i, kind in enumerate(kinds) if i == 0 or kinds[i - 1] != kind] == [
        "run_started",
        "tool_call.delta",
        "assistant_turn",
        "tool_call_started",
        "tool_call_finished",
        "text.delta",
        "assistant_turn",
        "run_finished",
    ]
    deltas = [e for e in received if e["id"] is None]
    assert [e["data"]["seq"] for e in deltas] == list(range(1, len(deltas) + 1))
    assert len(deltas) == paced_by_the_client.published
    stored = [e for e in received if e["id"] is not None]
    assert stored[0]["data"]["message"]["content"].startswith("/call calculate")
    assert stored[3]["data"]["message"]["content"] == "42"
    answer = "".join(e["data"]["text"] for e in deltas if e["event"] == "text.delta")
    assert stored[4]["data"]["message"]["content"] == answer
    assert stored[-1]["data"]["run"]["status"] == "completed"
    ids = [e["id"] for e in stored]
    assert ids == sorted(ids)
    run = Run.objects.get(pk=stored[0]["data"]["run"]["id"])
    assert run.status == Run.Status.COMPLETED


@pytest.mark.django_db(transaction=True)
def test_without_the_header_or_with_quality_zero_the_answer_is_as_ever(client, demo_conversation):
    response = post(client, demo_conversation, "hi", accept="application/json")
    assert response.status_code == 201 and response.json()["run"]["status"] == "completed"
    response = post(client, demo_conversation, "hi", accept=f"{SSE};q=0, application/json")
    assert response.status_code == 201
    assert not [t for t in threading.enumerate() if t.name.startswith("conversations-run-")]


def test_refusals_are_json_before_anything_streams(client, demo_conversation, settings):
    invalid = post(client, demo_conversation, "")
    assert invalid.status_code == 400
    assert invalid["Content-Type"] == "application/json"
    assert invalid.json()["errors"][0]["pointer"] == "/content"

    busy = start_run(conversation=demo_conversation, content="first")
    conflict = post(client, demo_conversation, "second")
    assert conflict.status_code == 409 and conflict.json()["code"] == "conversation_busy"
    Run.objects.filter(pk=busy.pk).update(status=Run.Status.CANCELLED, finished_at=timezone.now())

    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_STREAMS_PER_USER": 1}
    cache.clear()
    held = client.get(reverse("conversations:run-events", args=[busy.pk]))
    assert held.status_code == 200  # ended, but not yet read: it holds the one slot
    refused = post(client, demo_conversation, "third")
    assert refused.status_code == 429 and refused.json()["code"] == "too_many_streams"
    assert Run.objects.filter(conversation=demo_conversation).count() == 1  # none started
    b"".join(held.streaming_content)


@pytest.mark.django_db(transaction=True)
def test_with_workers_the_answer_follows_the_queued_run(
    client, demo_conversation, settings, broker
):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "EXECUTOR": "celery"}
    before = broker.waiting()
    response = post(client, demo_conversation, "hi")
    assert response.status_code == 200
    assert broker.waiting() == before + 1  # handed to the queue, which no worker reads here
    chunks = iter(response.streaming_content)
    next(chunks)  # retry
    started = parse(next(chunks))
    assert [e["event"] for e in started] == ["run_started"]
    run_id = started[0]["data"]["run"]["id"]
    Run.objects.filter(pk=run_id).update(status=Run.Status.CANCELLED, finished_at=timezone.now())
    events.publish(run_id, events.CHANGED)
    assert [e["event"] for e in parse(b"".join(chunks))] == ["run_finished"]


@pytest.mark.postgres  # the run's thread writes while the response reads (see above)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("tail", "body"),
    [
        ("messages/0/edit/", {"content": '/call calculate {"expression": "6*7"}'}),
        ("regenerate/", {}),
    ],
)
def test_edit_and_regenerate_stream_the_branch_run_and_name_the_branch(
    client, history, demo_conversation, tail, body
):
    response = client.post(
        f"/api/conversations/{demo_conversation.pk}/{tail}",
        body,
        content_type="application/json",
        headers={"Accept": SSE},
    )
    received = read_events(response)
    branch = Conversation.objects.get(forked_from=demo_conversation)
    assert response["Location"] == f"http://testserver/api/conversations/{branch.pk}/"
    finished = [e for e in received if e["event"] == "run_finished"]
    assert [e["data"]["run"]["status"] for e in finished] == ["completed"]
    assert finished[0]["data"]["run"]["conversation"] == str(branch.pk)
    assert Run.objects.get(conversation=branch).status == Run.Status.COMPLETED
    # The original is untouched: only its one scripted run.
    assert Run.objects.filter(conversation=demo_conversation).count() == 1
