"""Every way of starting a run answers 429 ``too_many_runs`` past ``MAX_RUNS_PER_USER``, writing nothing."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from conversations.api.errors import TOO_MANY_RUNS_RETRY_AFTER
from conversations.models import Conversation, Message, Run
from conversations.services import start_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_run_running(settings, user, profile):
    """The user's one allowed run, running in another conversation."""
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_RUNS_PER_USER": 1}
    cache.clear()
    busy = Conversation.objects.create(owner=user, title="busy", profile=profile)
    return start_run(conversation=busy, content="slow", profile=profile)


def assert_too_many_runs(response):
    assert response.status_code == 429, response.content
    body = response.json()
    assert body["code"] == "too_many_runs"
    assert body["detail"] == "At most 1 runs may be running at once; wait for one to end."
    assert response["Retry-After"] == str(TOO_MANY_RUNS_RETRY_AFTER)


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
def test_posting_a_message_past_the_limit_is_429_and_stores_nothing(
    api, history, demo_conversation, one_run_running, accept
):
    messages = Message.objects.filter(conversation=demo_conversation).count()
    url = reverse("conversations:conversation-messages", args=[demo_conversation.pk])

    response = api.post(url, {"content": "Hello"}, format="json", HTTP_ACCEPT=accept)

    assert_too_many_runs(response)
    assert Message.objects.filter(conversation=demo_conversation).count() == messages
    assert Run.objects.filter(status="running").get() == one_run_running


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
@pytest.mark.parametrize(
    ("tail", "body"), [("messages/0/edit/", {"content": "Hello there"}), ("regenerate/", None)]
)
def test_edit_and_regenerate_past_the_limit_are_429_before_any_branch(
    api, history, demo_conversation, one_run_running, tail, body, accept
):
    conversations = Conversation.objects.count()
    url = f"/api/conversations/{demo_conversation.pk}/{tail}"

    for _attempt in range(2):  # a client retrying makes nothing either
        response = api.post(url, body, format="json", HTTP_ACCEPT=accept)
        assert_too_many_runs(response)

    assert Conversation.objects.count() == conversations
    assert Run.objects.filter(status="running").get() == one_run_running


def test_the_ai_sdk_chat_past_the_limit_is_429_and_stores_nothing(
    api, demo_conversation, one_run_running
):
    url = reverse("conversations:conversation-chat", args=[demo_conversation.pk])
    body = {
        "id": "chat-1",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
        "trigger": "submit-message",
    }

    response = api.post(url, body, format="json")

    assert_too_many_runs(response)
    assert not Message.objects.filter(conversation=demo_conversation).exists()


def test_once_the_running_run_ends_the_next_message_goes_through(
    api, demo_conversation, one_run_running
):
    Run.objects.filter(pk=one_run_running.pk).update(status=Run.Status.COMPLETED)
    url = reverse("conversations:conversation-messages", args=[demo_conversation.pk])

    response = api.post(url, {"content": "Hello"}, format="json")

    assert response.status_code == 201, response.content
