"""A pool that runs dry while an event stream is open: the stream ends with an ``error`` event.

Both streams of a run are covered: the run event stream (``/events/``) and the
AI SDK's UI message stream, which ends as a whole run does (``error``,
``finish``, ``[DONE]``) with the busy text.

PostgreSQL behind a real psycopg pool of one connection (the ``held_connection``
fixture), taken by another thread between the stream's reads, so the next read
waits for the pool's timeout and gets what Django really raises.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.cache import cache
from django.db import connections
from django.test import AsyncClient
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from conversations import events
from conversations.api.ai_sdk.stream import ChatStream
from conversations.database import RETRY_AFTER_SECONDS
from conversations.models import Run
from conversations.services import start_run

pytestmark = pytest.mark.postgres


@pytest.fixture
def stream_url(small_pool, user, demo_conversation, profile):
    cache.clear()  # no stream slot left over by another test
    run = start_run(conversation=demo_conversation, content="Hello", profile=profile)
    return f"/api/runs/{run.pk}/events/"


@pytest.fixture
def token(user):
    return Token.objects.create(user=user).key


def assert_ends_with_the_busy_event(body: bytes):
    last = body.decode().strip().split("\n\n")[-1].splitlines()
    assert last[0] == "event: error", body
    data = json.loads(last[1].removeprefix("data: "))
    assert data["code"] == "service_unavailable"
    assert data["retry_after"] == RETRY_AFTER_SECONDS
    assert data["detail"].startswith("The service is busy.")
    assert f"retry: {RETRY_AFTER_SECONDS * 1000}" in body.decode()


def test_a_wsgi_stream_that_finds_the_pool_dry_ends_with_an_error_event(
    held_connection, stream_url, token
):
    client = APIClient(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.get(stream_url)
    assert response.status_code == 200
    chunks = iter(response.streaming_content)
    assert next(chunks).startswith(b"retry:")  # the stream is open; it gave its connection back

    with held_connection():
        rest = b"".join(chunks)  # ends: neither hangs nor raises

    assert_ends_with_the_busy_event(rest)
    response.close()


def test_an_asgi_stream_that_finds_the_pool_dry_ends_with_an_error_event(
    held_connection, stream_url, user
):
    client = AsyncClient()
    client.force_login(user)

    async def read():
        response = await client.get(stream_url)
        assert response.status_code == 200
        chunks = aiter(response.streaming_content)
        assert (await anext(chunks)).startswith(b"retry:")
        # Here the view ran on the test's own thread (async_to_sync's), which a
        # server would retire: give its connection back as that would.
        await sync_to_async(connections.close_all)()
        with held_connection():
            rest = [chunk async for chunk in chunks]
        return b"".join(rest)

    connections.close_all()
    assert_ends_with_the_busy_event(async_to_sync(read)())


@pytest.fixture
def chat_stream(small_pool, user, demo_conversation, profile):
    """The AI SDK stream of a started run that nothing executes, reading every 10 ms."""
    run = start_run(conversation=demo_conversation, content="Hello", profile=profile)
    stream = ChatStream(run, events.subscribe(run.pk))
    stream.poll_seconds = 0.01
    return stream


def assert_chat_ends_busy(body: bytes):
    frames = body.decode().strip().split("\n\n")
    assert frames[-1] == "data: [DONE]", body
    chunks = [json.loads(frame.removeprefix("data: ")) for frame in frames[:-1]]
    assert [chunk["type"] for chunk in chunks[-2:]] == ["error", "finish"]
    assert chunks[-2]["errorText"].startswith("The service is busy.")
    assert chunks[-1]["finishReason"] == "other"


def test_an_ai_sdk_stream_that_finds_the_pool_dry_ends_like_a_whole_stream(
    held_connection, chat_stream
):
    frames = chat_stream.iter_sync()
    assert b'"type":"start"' in next(frames)  # the stream is open; it gave its connection back

    with held_connection():
        rest = b"".join(frames)  # ends: neither hangs nor raises

    assert_chat_ends_busy(rest)
    assert chat_stream.subscription.closed
    connections.close_all()
    assert Run.objects.get(pk=chat_stream.run_id).status == Run.Status.RUNNING  # untouched


def test_an_ai_sdk_stream_under_asgi_that_finds_the_pool_dry_ends_the_same_way(
    held_connection, chat_stream
):
    async def read():
        frames = aiter(chat_stream.iter_async())
        assert b'"type":"start"' in await anext(frames)
        with held_connection():
            rest = [frame async for frame in frames]
        return b"".join(rest)

    connections.close_all()
    assert_chat_ends_busy(async_to_sync(read)())
    assert chat_stream.subscription.closed
