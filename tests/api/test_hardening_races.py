"""DELETE racing POST on one conversation: a clean 409 or 404, never a 500."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from conversations import signals
from conversations.models import Conversation, Run
from conversations.services.loop.runs import start_run

pytestmark = pytest.mark.django_db


def detail(conversation):
    return reverse("conversations:conversation-detail", args=[conversation.pk])


def messages(conversation):
    return reverse("conversations:conversation-messages", args=[conversation.pk])


def test_delete_while_a_queued_run_waits_is_409(api, demo_conversation):
    start_run(conversation=demo_conversation, content="queued")  # no process claimed it yet
    response = api.delete(detail(demo_conversation))
    assert response.status_code == 409
    assert response.json()["code"] == "conversation_busy"


def test_a_loop_whose_conversation_disappears_ends_cleanly(api, demo_conversation):
    def delete_everything(sender, tool_call, run, **kwargs):
        # The owner is deleted while a tool runs (an account deletion, an admin).
        demo_conversation.owner.delete()

    signals.tool_call_started.connect(delete_everything)
    try:
        response = api.post(
            messages(demo_conversation), {"content": "weather in Paris?"}, format="json"
        )
    finally:
        signals.tool_call_started.disconnect(delete_everything)
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert not Conversation.objects.exists()
    assert not Run.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_delete_racing_post_never_answers_500(user, profile):
    statuses: list[int] = []
    for _ in range(12):
        conversation = Conversation.objects.create(owner=user, profile=profile)
        barrier = threading.Barrier(2)

        def send(method, url, body=None, barrier=barrier):
            client = APIClient()
            client.force_authenticate(user)
            try:
                barrier.wait()
                statuses.append(getattr(client, method)(url, body, format="json").status_code)
            finally:
                connection.close()

        threads = [
            threading.Thread(target=send, args=("delete", detail(conversation))),
            threading.Thread(
                target=send, args=("post", messages(conversation), {"content": "weather?"})
            ),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert len(statuses) == 24
    assert set(statuses) <= {201, 204, 404, 409}, statuses
