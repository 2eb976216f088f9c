"""Edit and regenerate under the celery executor: 202, the run queued in the new branch."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from conversations.domain import ChatMessage
from conversations.models import Conversation, Provider, Run
from conversations.services.transcript.messages import append_messages

from .test_tasks import CELERY, published

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(broker):
    broker.client.delete(broker.queue)
    yield broker
    broker.client.delete(broker.queue)


@pytest.fixture
def client(user, settings, demo_conversation):
    settings.CONVERSATIONS = CELERY
    append_messages(
        conversation=demo_conversation,
        messages=[ChatMessage.user("Weather in Paris?"), ChatMessage.assistant("Rain.")],
    )
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_regenerate_queues_the_run_of_the_branch(
    client, demo_conversation, queue, django_capture_on_commit_callbacks
):
    url = reverse("conversations:conversation-regenerate", args=[demo_conversation.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url)
    assert response.status_code == 202, response.content
    body = response.json()
    branch = Conversation.objects.get(pk=body["conversation"]["id"])
    assert body["run"]["conversation"] == str(branch.pk) and body["run"]["status"] == "running"
    assert body["messages"] == []  # nothing new is stored before the worker answers
    assert body["events"].endswith(f"/api/runs/{body['run']['id']}/events/")
    assert published(queue) == [body["run"]["id"]]
    assert [m.role for m in branch.messages.order_by("position")] == ["user"]


def test_edit_queues_the_run_with_the_new_message(
    client, demo_conversation, queue, django_capture_on_commit_callbacks
):
    url = reverse("conversations:conversation-message-edit", args=[demo_conversation.pk, 0])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"content": "Weather in Rome?"}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert [m["content"] for m in body["messages"]] == ["Weather in Rome?"]
    assert published(queue) == [body["run"]["id"]]


def test_an_unusable_profile_is_refused_before_anything_is_copied(client, demo_conversation, queue):
    Provider.objects.update(api_key_ref="env:NOT_SET_ANYWHERE", adapter=Provider.Adapter.OPENAI)
    url = reverse("conversations:conversation-regenerate", args=[demo_conversation.pk])
    response = client.post(url)
    assert response.status_code == 503 and response.json()["code"] == "configuration_error"
    assert Conversation.objects.count() == 1
    assert not Run.objects.exists()
    assert queue.waiting() == 0
