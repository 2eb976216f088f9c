"""The task body and the celery executor, without a worker (the broker is real Redis).

What a worker does with a message is a plain function, ``execute_queued_run``:
these tests call it directly for each state a run can be in when its message
arrives. Publishing goes to this session's own Redis queue.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from conversations.domain import ChatMessage, ToolCall
from conversations.exceptions import ConfigurationError
from conversations.models import Conversation, Provider, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.selectors import get_history
from conversations.services import start_run
from conversations.services.loop import claim_run
from conversations.services.loop.executors import requeue_runs, submit_message
from conversations.services.transcript.messages import append_messages
from conversations.tasks import execute_queued_run
from tests.processes import ROOT

pytestmark = pytest.mark.django_db

CELERY = {"EXECUTOR": "celery", "RUN_LEASE_SECONDS": 60, "MESSAGE_THROTTLE_RATE": None}


@pytest.fixture
def queue(broker):
    """This session's queue, emptied before and after the test."""
    broker.client.delete(broker.queue)
    yield broker
    broker.client.delete(broker.queue)


def published(broker):
    """The run ids waiting in the queue, oldest first."""
    bodies = [json.loads(raw) for raw in broker.client.lrange(broker.queue, 0, -1)][::-1]
    return [json.loads(base64.b64decode(b["body"]))[0][0] for b in bodies]


# The task body ------------------------------------------------------------------------------


def test_a_queued_run_is_executed(demo_conversation):
    run = start_run(conversation=demo_conversation, content="What's the weather in Paris?")
    assert execute_queued_run(str(run.pk)) == "executed"
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.claimed_at is not None


def test_a_message_for_an_ended_run_does_nothing(demo_conversation):
    run = start_run(conversation=demo_conversation, content="What's the weather in Paris?")
    execute_queued_run(str(run.pk))
    count = demo_conversation.messages.count()
    assert execute_queued_run(str(run.pk)) == "ended"
    assert demo_conversation.messages.count() == count


def test_a_message_for_a_deleted_run_does_nothing(demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi")
    demo_conversation.delete()
    assert execute_queued_run(str(run.pk)) == "missing"


def test_a_redelivery_while_the_worker_lives_does_nothing(demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi")
    claim_run(run=run)  # the first delivery, still working
    assert execute_queued_run(str(run.pk)) == "claimed"
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert [m.role for m in get_history(conversation=demo_conversation)] == ["user"]


def test_a_redelivery_after_the_worker_died_is_recovered_not_resumed(demo_conversation, settings):
    settings.CONVERSATIONS = CELERY
    run = start_run(conversation=demo_conversation, content="What's the weather in Paris?")
    claim_run(run=run)
    # The dead worker had persisted a turn and marked its call running.
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    append_messages(
        conversation=demo_conversation, messages=[ChatMessage.assistant_tool_calls([call])], run=run
    )
    ToolCallRow.objects.filter(call_id="call_1").update(
        status=ToolCallRow.Status.RUNNING, started_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=61))

    assert execute_queued_run(str(run.pk)) == "recovered"
    run.refresh_from_db()
    assert run.status == Run.Status.INTERRUPTED
    assert ToolCallRow.objects.get(call_id="call_1").status == ToolCallRow.Status.INTERRUPTED
    history = get_history(conversation=demo_conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool"]  # nothing resumed


def test_a_configuration_error_in_the_worker_fails_the_run(demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi")
    Provider.objects.update(is_active=False)
    assert execute_queued_run(str(run.pk)) == "failed"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.error_code == "configuration_error"


# Publishing ----------------------------------------------------------------------------------


def test_the_celery_executor_publishes_after_the_commit(
    demo_conversation, settings, queue, django_capture_on_commit_callbacks
):
    settings.CONVERSATIONS = CELERY
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = submit_message(conversation=demo_conversation, content="What's the weather in Paris?")
    assert queue.waiting() == 0  # nothing before the commit: a worker could not see the run
    assert run.status == Run.Status.RUNNING and run.claimed_at is None
    for callback in callbacks:
        callback()
    assert published(queue) == [str(run.pk)]
    assert [m.role for m in get_history(conversation=demo_conversation)] == ["user"]


def test_the_api_answers_202_with_the_run_and_where_to_follow_it(
    demo_conversation, user, settings, queue, django_capture_on_commit_callbacks
):
    settings.CONVERSATIONS = CELERY
    client = APIClient()
    client.force_authenticate(user)
    url = reverse("conversations:conversation-messages", args=[demo_conversation.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"content": "Weather in Paris?"}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    run_id = body["run"]["id"]
    assert body["run"]["status"] == "running"
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert body["url"] == f"http://testserver/api/runs/{run_id}/" == response["Location"]
    assert body["events"] == f"http://testserver/api/runs/{run_id}/events/"
    assert published(queue) == [run_id]
    busy = client.post(url, {"content": "again"}, format="json")
    assert busy.status_code == 409 and busy.json()["code"] == "conversation_busy"


def test_a_configuration_error_is_reported_before_anything_is_queued(
    demo_conversation, user, settings, queue
):
    settings.CONVERSATIONS = CELERY
    Provider.objects.update(api_key_ref="env:NOT_SET_ANYWHERE", adapter=Provider.Adapter.OPENAI)
    client = APIClient()
    client.force_authenticate(user)
    url = reverse("conversations:conversation-messages", args=[demo_conversation.pk])
    response = client.post(url, {"content": "hi"}, format="json")
    assert response.status_code == 503 and response.json()["code"] == "configuration_error"
    assert not Run.objects.exists() and not demo_conversation.messages.exists()
    assert queue.waiting() == 0


# Requeueing ------------------------------------------------------------------------------------


def test_requeue_publishes_only_runs_no_worker_took(demo_conversation, user, settings, queue):
    settings.CONVERSATIONS = CELERY
    old = timezone.now() - timedelta(seconds=120)
    lost = start_run(conversation=demo_conversation, content="lost")
    others = [
        Conversation.objects.create(owner=user, profile=demo_conversation.profile) for _ in range(2)
    ]
    taken = start_run(conversation=others[0], content="taken")
    claim_run(run=taken)
    fresh = start_run(conversation=others[1], content="fresh")  # still within its lease
    Run.objects.filter(pk__in=[lost.pk, taken.pk]).update(heartbeat_at=old)

    assert [r.pk for r in requeue_runs()] == [lost.pk]
    assert published(queue) == [str(lost.pk)]
    assert Run.objects.get(pk=lost.pk).heartbeat_at > old  # a new lease in the queue
    assert requeue_runs() == []  # not again before that lease runs out
    out = io.StringIO()
    call_command("recover_runs", "--requeue", stdout=out)
    assert f"interrupted run {taken.pk}" in out.getvalue()
    assert Run.objects.get(pk=fresh.pk).status == Run.Status.RUNNING
    assert Run.objects.get(pk=lost.pk).status == Run.Status.RUNNING


def test_requeue_needs_the_celery_executor(settings):
    settings.CONVERSATIONS = {"EXECUTOR": "inline"}
    with pytest.raises(ConfigurationError):
        requeue_runs()
    with pytest.raises(CommandError, match="--requeue needs"):
        call_command("recover_runs", "--requeue", stdout=io.StringIO())


# Without Celery -----------------------------------------------------------------------------------

WITHOUT_CELERY = """
import sys
sys.modules["celery"] = None  # as if it were not installed
import django
django.setup()
from django.core.checks import run_checks
import conversations.tasks as tasks
print(tasks.execute_run_task, tasks.recover_runs_task)
print(sorted(m.id for m in run_checks()))
"""


@pytest.mark.parametrize(
    ("executor", "errors"), [("inline", "[]"), ("celery", "['conversations.E006']")]
)
def test_the_app_works_without_celery_and_the_check_names_the_problem(executor, errors):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "CONVERSATIONS_EXECUTOR": executor,
        "PYTHONPATH": str(ROOT),
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_CELERY],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == ["None None", errors]
