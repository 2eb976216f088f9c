"""Approvals with the celery executor: the last decision hands the run to a worker once."""

from __future__ import annotations

import base64
import json

import pytest
from rest_framework.test import APIClient

from conversations.domain import ToolCall
from conversations.models import Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls
from conversations.services import run_tool_loop
from conversations.tasks import execute_queued_run
from conversations.tools import registry, tool

pytestmark = pytest.mark.django_db

CELERY = {"EXECUTOR": "celery", "MESSAGE_THROTTLE_RATE": None}


@pytest.fixture
def queue(broker):
    broker.client.delete(broker.queue)
    yield broker
    broker.client.delete(broker.queue)


def published(broker):
    bodies = [json.loads(raw) for raw in broker.client.lrange(broker.queue, 0, -1)][::-1]
    return [json.loads(base64.b64decode(b["body"]))[0][0] for b in bodies]


def test_the_last_decision_queues_the_run_and_a_worker_resumes_it(
    demo_conversation, user, settings, queue, django_capture_on_commit_callbacks
):
    sent = []
    with registry.isolated(empty=True) as r:

        @tool(registry=r, requires_approval=True)
        def send_mail(to: str) -> str:
            """Send a mail."""
            sent.append(to)
            return "sent"

        mail = ToolCall(id="c_mail", name="send_mail", arguments={"to": "bob@example.com"})
        provider = ScriptedProvider([scripted_calls(mail)])
        run = run_tool_loop(conversation=demo_conversation, content="go", provider=provider)
        assert run.status == Run.Status.AWAITING_APPROVAL
        settings.CONVERSATIONS = CELERY
        client = APIClient()
        client.force_authenticate(user)
        pk = ToolCallRow.objects.get(call_id="c_mail").pk
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(f"/api/tool-calls/{pk}/approve/")
        assert response.status_code == 202, response.content
        assert response.json()["run"]["status"] == "running"
        assert sent == []
        assert published(queue) == [str(run.pk)]
        assert execute_queued_run(str(run.pk)) == "executed"
        assert execute_queued_run(str(run.pk)) == "ended"  # a redelivery does nothing
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert sent == ["bob@example.com"]
