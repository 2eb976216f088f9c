"""Cancelling a run through the API; with the inline executor, from a second request."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from conversations.models import Run
from conversations.models import ToolCall as ToolCallRow
from conversations.selectors import get_history
from conversations.services.loop.runs import CANCEL_CHECK_INTERVAL, claim_run, start_run
from conversations.tools import registry, tool
from tests.providers.replay import assert_every_adapter_accepts

pytestmark = pytest.mark.django_db


def cancel_url(run):
    return reverse("conversations:run-cancel", args=[run.pk])


def test_cancelling_a_running_run_answers_202_with_the_run(api, demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi")
    claim_run(run=run)  # a process is working on it
    response = api.post(cancel_url(run))
    assert response.status_code == 202
    body = response.json()
    assert body["id"] == str(run.pk)
    assert body["status"] == "running" and body["cancel_requested"] is True
    assert Run.objects.get(pk=run.pk).cancel_requested


def test_a_run_waiting_for_a_worker_is_cancelled_at_once(api, demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi")
    body = api.post(cancel_url(run)).json()
    assert body["status"] == "cancelled" and body["error_code"] == "run_cancelled"
    assert [m.role for m in get_history(conversation=demo_conversation)] == ["user"]


def test_an_ended_run_is_409(api, history):
    response = api.post(cancel_url(history))
    assert response.status_code == 409
    assert response.json()["code"] == "run_not_running"


def test_another_users_run_is_404_and_untouched(other_api, demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi")
    response = other_api.post(cancel_url(run))
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert not Run.objects.get(pk=run.pk).cancel_requested


def test_cancel_needs_credentials(anonymous, history):
    response = anonymous.post(cancel_url(history))
    assert response.status_code == 401


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_inline_run_cancelled_by_a_second_request(user, demo_conversation):
    """The POST runs the loop in one thread; a second client cancels it from another."""
    in_tool = threading.Event()
    release = threading.Event()
    executed = []

    with registry.isolated() as r:

        @tool(registry=r, concurrent=False)  # one after the other: b must not start
        def hold(label: str) -> str:
            """Waits until the test lets it finish."""
            executed.append(label)
            in_tool.set()
            release.wait(10)
            return f"{label} held"

        poster = APIClient()
        poster.force_authenticate(user)
        url = reverse("conversations:conversation-messages", args=[demo_conversation.pk])
        answer = {}

        def post_message():
            try:
                answer["response"] = poster.post(
                    url,
                    {"content": '/call hold {"label": "a"}\n/call hold {"label": "b"}'},
                    format="json",
                )
            finally:
                connection.close()

        thread = threading.Thread(target=post_message)
        thread.start()
        try:
            assert in_tool.wait(10), "the first tool never started"
            run = Run.objects.get(conversation=demo_conversation, status=Run.Status.RUNNING)
            canceller = APIClient()
            canceller.force_authenticate(user)
            cancelled = canceller.post(cancel_url(run))
            assert cancelled.status_code == 202, cancelled.content
            assert cancelled.json()["status"] == "running"
        finally:
            # Let the running tool finish after the loop's next cancellation check is due.
            threading.Timer(CANCEL_CHECK_INTERVAL, release.set).start()
            thread.join(20)

    response = answer["response"]
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["run"]["status"] == "cancelled"
    assert executed == ["a"]  # the running tool finished, the other never started
    statuses = [c["status"] for c in body["run"]["tool_calls"]]
    assert statuses == [ToolCallRow.Status.SUCCEEDED, ToolCallRow.Status.CANCELLED]
    history = get_history(conversation=demo_conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool"]
    assert history[-1].content == 'Error: tool "hold" was cancelled and did not complete.'
    assert_every_adapter_accepts(history)
