"""Run events from real servers while a real worker runs the loop (PostgreSQL, Redis).

The same scenario under the development server's WSGI (pytest-django's live
server) and under uvicorn (ASGI): post a message (202), follow the run's
events as they happen, drop the connection half-way, resume with
``Last-Event-ID`` and get exactly the missing events. Under uvicorn, idle
streams must not hold a thread each.
"""

from __future__ import annotations

import json
import os
import threading
import time

import httpx
import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from conversations.models import Run
from conversations.services import start_run
from conversations.services.loop import claim_run

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TWO_SLOW_STEPS = (
    '/call slow_step {"label": "a", "seconds": 0.6}\n/call slow_step {"label": "b", "seconds": 0.6}'
)
EXPECTED_TYPES = [
    "run_started",
    "assistant_turn",
    "tool_call_started",
    "tool_call_started",
    "tool_call_finished",
    "tool_call_finished",
    "assistant_turn",
    "run_finished",
]


@pytest.fixture
def token(user):
    return Token.objects.create(user=user)


def read_events(url, token, *, last_event_id=None, stop_after=None, timeout=30.0):
    """Read events as they arrive; hang up after ``stop_after`` of them (None: to the end)."""
    headers = {"Authorization": f"Token {token.key}", "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    events, fields = [], {}
    with httpx.stream("GET", url, headers=headers, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line == "":
                if "event" in fields:
                    events.append(
                        {
                            "id": int(fields["id"]),
                            "event": fields["event"],
                            "data": json.loads(fields["data"]),
                            "at": time.monotonic(),
                        }
                    )
                    if stop_after is not None and len(events) >= stop_after:
                        break  # leaving the block closes the connection
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
    return events


def follow_post_and_resume(base_url, token, demo_conversation):
    """Post; read the first four events live; hang up; resume; return (live, resumed, replay)."""
    post = httpx.post(
        f"{base_url}{reverse('conversations:conversation-messages', args=[demo_conversation.pk])}",
        json={"content": TWO_SLOW_STEPS},
        headers={"Authorization": f"Token {token.key}"},
        timeout=30,
    )
    assert post.status_code == 202, post.text
    events_url = post.json()["events"]
    run_id = post.json()["run"]["id"]

    live = read_events(events_url, token, stop_after=4)  # up to both tool_call_started
    assert Run.objects.get(pk=run_id).status == Run.Status.RUNNING  # they came while it ran
    resumed = read_events(events_url, token, last_event_id=live[-1]["id"])
    assert Run.objects.get(pk=run_id).status == Run.Status.COMPLETED
    replay = read_events(events_url, token)
    return live, resumed, replay


def assert_resumed_exactly(live, resumed, replay):
    strip = [{k: e[k] for k in ("id", "event")} for e in replay]
    assert [e["event"] for e in replay] == EXPECTED_TYPES
    assert [{k: e[k] for k in ("id", "event")} for e in live + resumed] == strip
    received = [e["id"] for e in live + resumed]
    assert received == sorted(received) and len(set(received)) == len(received)
    assert replay[-1]["data"]["run"]["status"] == "completed"


def test_events_live_under_the_development_servers_wsgi(
    live_server, workers, settings, token, demo_conversation, tmp_path
):
    settings.CONVERSATIONS = {"EXECUTOR": "celery", "MESSAGE_THROTTLE_RATE": None}
    workers(WORKER_TOOL_LOG=str(tmp_path / "tools.log"))
    live, resumed, replay = follow_post_and_resume(live_server.url, token, demo_conversation)
    assert_resumed_exactly(live, resumed, replay)


def test_events_live_under_uvicorn(uvicorn, workers, token, demo_conversation, tmp_path):
    server, base_url = uvicorn(CONVERSATIONS_EXECUTOR="celery")
    workers(WORKER_TOOL_LOG=str(tmp_path / "tools.log"))
    live, resumed, replay = follow_post_and_resume(base_url, token, demo_conversation)
    assert_resumed_exactly(live, resumed, replay)
    assert "Warning" not in server.output()


def test_idle_streams_under_uvicorn_hold_no_thread(uvicorn, token, demo_conversation):
    # More streams than the shared pool (asyncio's default executor) has threads.
    pool = min(32, (os.cpu_count() or 1) + 4)
    streams = pool + 16
    # One user holds them all: lift the per-user limit for this server.
    server, base_url = uvicorn(CONVERSATIONS_MAX_STREAMS_PER_USER=str(streams + 1))
    run = start_run(conversation=demo_conversation, content="hi")
    claim_run(run=run)  # "a worker has it": the streams just wait
    url = f"{base_url}{reverse('conversations:run-events', args=[run.pk])}"

    assert [e["event"] for e in read_events(url, token, stop_after=1)] == ["run_started"]
    time.sleep(1)  # the warm-up stream has hung up; its threads are back in the pool
    baseline = server.threads()

    results: list[list[dict]] = []
    opened = threading.Semaphore(0)

    def follow():
        events = []
        for event in read_events_iter(url, token):
            events.append(event)
            if event["event"] == "run_started":
                opened.release()
        results.append(events)

    readers = [threading.Thread(target=follow) for _ in range(streams)]
    for reader in readers:
        reader.start()
    for _ in range(streams):
        assert opened.acquire(timeout=20)
    time.sleep(2 * 0.5 + 0.2)  # a few polls of every stream
    during = server.threads()

    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
    for reader in readers:
        reader.join(20)
    assert len(results) == streams
    assert all([e["event"] for e in r] == ["run_started", "run_finished"] for r in results)
    # The shared pool may fill up; one thread per stream would be ``streams`` more.
    print(f"uvicorn threads: {baseline} before, {during} with {streams} open streams")
    assert during - baseline <= pool + 1, (baseline, during)


def read_events_iter(url, token):
    """Like ``read_events`` to the end, yielding each event as it arrives."""
    headers = {"Authorization": f"Token {token.key}"}
    fields = {}
    with httpx.stream("GET", url, headers=headers, timeout=30) as response:
        for line in response.iter_lines():
            if line == "":
                if "event" in fields:
                    yield {"id": int(fields["id"]), "event": fields["event"]}
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")


def test_a_broker_that_is_down_fails_the_run_with_503(uvicorn, token, demo_conversation):
    _, base_url = uvicorn(
        CONVERSATIONS_EXECUTOR="celery", CELERY_BROKER_URL="redis://127.0.0.1:9/0"
    )
    url = f"{base_url}{reverse('conversations:conversation-messages', args=[demo_conversation.pk])}"
    headers = {"Authorization": f"Token {token.key}"}
    response = httpx.post(url, json={"content": "hi"}, headers=headers, timeout=60)
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["code"] == "executor_unavailable"
    assert body["run"]["status"] == "failed"
    assert [m["role"] for m in body["messages"]] == ["user"]
    # Nothing waits for a worker: the conversation takes the next message at once.
    assert not Run.objects.filter(
        conversation=demo_conversation, status=Run.Status.RUNNING
    ).exists()
