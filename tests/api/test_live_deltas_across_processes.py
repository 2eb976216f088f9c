"""Deltas published by a Celery worker reach an SSE client of a uvicorn process.

Three real processes: this test (the client), ``uvicorn`` (the web process
relaying events) and a worker executing the run, whose tool
``stream_words`` (tests/worker_app) publishes text deltas the way the loop
streams an answer. The two processes share Redis as their cache (stream
slots, the in-flight snapshot) and either Redis or PostgreSQL as their bus.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from conversations.models import Run
from tests.conftest import TEST_REDIS_DB
from tests.worker_app.llm_tools import STREAM_SEQ_BASE

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WORDS = 60
BUSES = {
    "redis": f"redis://127.0.0.1:6379/{TEST_REDIS_DB}?prefix=tests-{uuid.uuid4().hex[:8]}",
    "postgres": "postgres",
}


@pytest.fixture
def token(user):
    return Token.objects.create(user=user)


def post_and_follow(base_url, token, conversation, content):
    """POST with ``Accept: text/event-stream``; every event until ``run_finished``."""
    url = f"{base_url}{reverse('conversations:conversation-messages', args=[conversation.pk])}"
    headers = {"Authorization": f"Token {token.key}", "Accept": "text/event-stream"}
    received, fields = [], {}
    with httpx.stream(
        "POST", url, json={"content": content}, headers=headers, timeout=60
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line == "":
                if "event" in fields:
                    received.append(
                        {
                            "id": int(fields["id"]) if "id" in fields else None,
                            "event": fields["event"],
                            "data": json.loads(fields["data"]),
                        }
                    )
                    if fields["event"] == "run_finished":
                        break
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
    return received


@pytest.mark.parametrize("bus", sorted(BUSES))
def test_a_workers_deltas_stream_to_a_client_of_the_web_process(
    bus, uvicorn, workers, token, demo_conversation
):
    env = {
        "CONVERSATIONS_EXECUTOR": "celery",
        "CONVERSATIONS_EVENTS_URL": BUSES[bus],
        "DJANGO_CACHE_URL": f"redis://127.0.0.1:6379/{TEST_REDIS_DB}",
    }
    server, base_url = uvicorn(**env)
    workers(**env)
    content = f'/call stream_words {{"count": {WORDS}, "pause": 0.005}}'
    received = post_and_follow(base_url, token, demo_conversation, content)

    kinds = [e["event"] for e in received]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert received[-1]["data"]["run"]["status"] == "completed"
    words = [e for e in received if e["event"] in ("inflight", "text.delta")]
    relayed = [e["event"] for e in words].count("text.delta")
    print(f"{bus}: {relayed} of {WORDS} words relayed live")
    assert relayed >= 1
    # What the client shows: the snapshot (if it joined late), then every later word in order.
    text, seqs = "", []
    for event in words:
        if event["event"] == "inflight":
            text, seqs = event["data"]["text"], [event["data"]["seq"]]
        else:
            text += event["data"]["text"]
            seqs.append(event["data"]["seq"])
    assert text == "".join(f"w{n} " for n in range(1, WORDS + 1))
    assert seqs == list(range(seqs[0], STREAM_SEQ_BASE + WORDS + 1))
    assert all(e["id"] is None for e in words)
    persisted = [e["id"] for e in received if e["id"] is not None]
    assert persisted == sorted(persisted)
    assert Run.objects.get(pk=received[0]["data"]["run"]["id"]).status == Run.Status.COMPLETED
    assert "Traceback" not in server.output()


def test_a_queue_that_refuses_the_run_answers_json_even_to_a_stream_request(
    uvicorn, token, demo_conversation
):
    _, base_url = uvicorn(
        CONVERSATIONS_EXECUTOR="celery", CELERY_BROKER_URL="redis://127.0.0.1:9/0"
    )
    url = f"{base_url}{reverse('conversations:conversation-messages', args=[demo_conversation.pk])}"
    headers = {"Authorization": f"Token {token.key}", "Accept": "text/event-stream"}
    response = httpx.post(url, json={"content": "hi"}, headers=headers, timeout=60)
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["code"] == "executor_unavailable"
