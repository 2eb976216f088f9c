"""Open event streams: a per-user limit, and no database connection held between polls."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.api.sse.views import RunEventStream
from conversations.models import Conversation, Run
from conversations.providers.scripted import ScriptedProvider
from conversations.services.loop.runs import claim_run, start_run

pytestmark = pytest.mark.django_db


def events_url(run):
    return reverse("conversations:run-events", args=[run.pk])


@pytest.fixture
def browser(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def live_run(demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi", provider=ScriptedProvider())
    claim_run(run=run)
    return run


def finish(run):
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED, finished_at=timezone.now())


def read_to_the_end(response):
    """The stream of an ended run ends by itself: then its slot is given back."""
    return b"".join(response.streaming_content)


def test_a_user_may_hold_at_most_max_streams_per_user_streams(
    browser, user, live_run, profile, settings
):
    settings.CONVERSATIONS = {"MAX_STREAMS_PER_USER": 2}
    cache.clear()
    opened = [browser.get(events_url(live_run)) for _ in range(2)]
    assert [r.status_code for r in opened] == [200, 200]
    third = browser.get(events_url(live_run))
    assert third.status_code == 429
    assert third["content-type"] == "application/json"
    assert third.json()["code"] == "too_many_streams"
    # Streams that end give their slots back.
    finish(live_run)
    for response in opened:
        read_to_the_end(response)
    other = Conversation.objects.create(owner=user, profile=profile)
    another = start_run(conversation=other, content="hi", provider=ScriptedProvider())
    claim_run(run=another)
    fourth = browser.get(events_url(another))
    assert fourth.status_code == 200
    finish(another)
    read_to_the_end(fourth)


def test_the_default_limit_is_ten(browser, live_run):
    cache.clear()
    opened = [browser.get(events_url(live_run)) for _ in range(10)]
    assert [r.status_code for r in opened] == [200] * 10
    assert browser.get(events_url(live_run)).status_code == 429
    finish(live_run)
    for response in opened:
        read_to_the_end(response)
    again = browser.get(events_url(live_run))
    assert again.status_code == 200
    read_to_the_end(again)


class QuickStream(RunEventStream):
    poll_seconds = 0.01
    keepalive_seconds = 0.05


@pytest.mark.django_db(transaction=True)
def test_a_waiting_stream_holds_no_database_connection(live_run):
    stream = QuickStream(live_run.pk)
    first = stream.poll()
    assert connection.connection is not None  # the view's poll used it...
    chunks = stream.iter_sync(first)
    next(chunks)  # retry
    assert connection.connection is None  # ...and the stream let it go
    next(chunks)  # run_started
    assert next(chunks) == b": keep-alive\n\n"  # it polled meanwhile, and let go again
    assert connection.connection is None
    chunks.close()
