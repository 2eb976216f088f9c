"""Runs executed by real Celery worker processes over a real Redis, on PostgreSQL.

Each test starts its own worker(s) (``tests.processes``) on this session's
queue and test database. The workers install ``tests.worker_app``, whose
``slow_step`` tool writes a line to a file each time its body starts: that
file, not the database, proves how often a tool ran. The demo model calls it
through its ``/call`` command.
"""

from __future__ import annotations

import io
import json
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from conversations.models import Conversation, Run, ToolCall
from conversations.selectors import get_history
from conversations.services import start_run
from conversations.services.loop import claim_run
from conversations.tasks import execute_run_task
from tests.providers.replay import assert_every_adapter_accepts

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LEASE = 2
"""Seconds: the lease of the workers and of this process (the heartbeat beats every 2/3 s)."""
TERMINAL_TIMEOUT = 30.0
INTERRUPTED = 'Error: tool "slow_step" was interrupted and did not complete.'
CANCELLED = 'Error: tool "slow_step" was cancelled and did not complete.'


@pytest.fixture(autouse=True)
def celery_executor(settings):
    settings.CONVERSATIONS = {
        "EXECUTOR": "celery",
        "RUN_LEASE_SECONDS": LEASE,
        "MESSAGE_THROTTLE_RATE": None,
    }


@pytest.fixture
def tool_log(tmp_path):
    return tmp_path / "tool-executions.log"


@pytest.fixture
def start(workers, tool_log):
    """Start a worker with the short lease and the tool log; extra env as keywords."""

    def start_one(**env):
        return workers(
            WORKER_TOOL_LOG=str(tool_log), CONVERSATIONS_RUN_LEASE_SECONDS=str(LEASE), **env
        )

    return start_one


@pytest.fixture
def api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def post(api, demo_conversation, content):
    url = reverse("conversations:conversation-messages", args=[demo_conversation.pk])
    return api.post(url, {"content": content}, format="json")


def slow(*steps):
    """A demo-model message calling ``slow_step`` once per ``(label, seconds)``."""
    return "\n".join(
        f"/call slow_step {json.dumps({'label': label, 'seconds': seconds})}"
        for label, seconds in steps
    )


def executions(tool_log):
    """The labels of the slow_step bodies that started, in order."""
    if not tool_log.exists():
        return []
    return [line.split()[0] for line in tool_log.read_text().splitlines()]


def wait_until(condition, timeout=TERMINAL_TIMEOUT, message="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.05)


def wait_for_end(run_id, timeout=TERMINAL_TIMEOUT):
    def ended():
        return Run.objects.get(pk=run_id).status != Run.Status.RUNNING

    wait_until(ended, timeout, f"run {run_id} to end")
    return Run.objects.get(pk=run_id)


def wait_until_stale(run_id):
    """Until the run's heartbeat is older than the lease (its worker is gone)."""
    run = Run.objects.get(pk=run_id)
    time.sleep(
        max(
            0.0,
            (run.heartbeat_at + timedelta(seconds=LEASE + 0.2) - timezone.now()).total_seconds(),
        )
    )


def assert_valid_history(demo_conversation):
    history = get_history(conversation=demo_conversation)
    assert_every_adapter_accepts(history)
    return history


def test_a_message_posted_with_the_celery_executor_is_answered_202_and_runs_in_a_worker(
    start, api, demo_conversation
):
    worker = start()
    response = post(api, demo_conversation, "What's the weather in Paris?")
    assert response.status_code == 202, response.content
    body = response.json()
    run_url = body["url"]
    assert response["Location"] == run_url
    assert run_url.endswith(reverse("conversations:run-detail", args=[body["run"]["id"]]))
    assert body["events"].endswith(f"/api/runs/{body['run']['id']}/events/")
    assert body["messages"][0]["role"] == "user"
    assert body["messages"][0]["content"] == "What's the weather in Paris?"

    run = wait_for_end(body["run"]["id"])
    assert run.status == Run.Status.COMPLETED, (run.error_code, run.error_message)
    assert run.worker.endswith(f":{worker.pid}")  # executed in the worker process
    assert "Paris" in run.final_content
    history = assert_valid_history(demo_conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    worker.wait_for("succeeded")
    assert "'executed'" in worker.output()
    assert api.get(run_url).json()["status"] == "completed"


def test_a_worker_killed_mid_tool_leaves_an_interrupted_run_and_nothing_runs_twice(
    start, api, demo_conversation, tool_log
):
    first = start()
    response = post(api, demo_conversation, slow(("kill-me", 30)))
    assert response.status_code == 202
    run_id = response.json()["run"]["id"]
    wait_until(lambda: executions(tool_log) == ["kill-me"], message="the tool to start")

    first.kill()  # SIGKILL in the middle of the tool: its message is never acknowledged
    wait_until_stale(run_id)
    out = io.StringIO()
    call_command("recover_runs", stdout=out)
    assert f"interrupted run {run_id}" in out.getvalue()

    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.INTERRUPTED and run.error_code == "interrupted"
    (call,) = ToolCall.objects.filter(message__run=run)
    assert call.status == ToolCall.Status.INTERRUPTED
    history = assert_valid_history(demo_conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[-1].content == INTERRUPTED

    # The unacknowledged message comes back to the next worker, which finds the run ended.
    second = start(CELERY_VISIBILITY_TIMEOUT="1")
    second.wait_for("succeeded")
    assert "'ended'" in second.output()
    assert executions(tool_log) == ["kill-me"]  # never executed again

    # The conversation goes on: the next message is answered (here in the request).
    with_inline = {"EXECUTOR": "inline", "RUN_LEASE_SECONDS": LEASE, "MESSAGE_THROTTLE_RATE": None}
    from django.test import override_settings

    with override_settings(CONVERSATIONS=with_inline):
        response = post(api, demo_conversation, "What's the weather in Paris?")
    assert response.status_code == 201, response.content
    assert response.json()["run"]["status"] == "completed"
    assert_valid_history(demo_conversation)
    assert executions(tool_log) == ["kill-me"]


def test_a_redelivered_message_of_a_dead_worker_is_recovered_not_executed(
    start, api, demo_conversation, tool_log
):
    first = start()
    response = post(api, demo_conversation, slow(("once", 30)))
    run_id = response.json()["run"]["id"]
    wait_until(lambda: executions(tool_log) == ["once"], message="the tool to start")
    first.kill()
    wait_until_stale(run_id)

    # No recover_runs here: the redelivered task itself finds the claim's worker dead.
    second = start(CELERY_VISIBILITY_TIMEOUT="1")
    second.wait_for("succeeded")
    assert "'recovered'" in second.output()
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.INTERRUPTED
    assert assert_valid_history(demo_conversation)[-1].content == INTERRUPTED
    assert executions(tool_log) == ["once"]


def test_a_duplicate_delivery_while_the_worker_is_alive_does_nothing(
    start, api, demo_conversation, tool_log
):
    first, second = start(), start()
    response = post(api, demo_conversation, slow(("single", 2)))
    run_id = response.json()["run"]["id"]
    wait_until(lambda: executions(tool_log) == ["single"], message="the tool to start")
    execute_run_task.delay(run_id)  # the broker hands the same run out again

    run = wait_for_end(run_id)
    assert run.status == Run.Status.COMPLETED
    duplicate = first if "'claimed'" in first.output() else second
    duplicate.wait_for("'claimed'")
    assert executions(tool_log) == ["single"]
    assert_valid_history(demo_conversation)


def test_cancelling_through_the_api_while_a_worker_runs_a_tool(
    start, api, demo_conversation, tool_log
):
    start(CONVERSATIONS_TOOL_CONCURRENCY="1")  # the second call waits for the first
    response = post(api, demo_conversation, slow(("first", 1.0), ("second", 1.0)))
    run_id = response.json()["run"]["id"]
    wait_until(lambda: executions(tool_log) == ["first"], message="the first tool to start")

    cancel = api.post(reverse("conversations:run-cancel", args=[run_id]))
    assert cancel.status_code == 202, cancel.content
    assert cancel.json()["status"] == "running" and cancel.json()["cancel_requested"] is True

    run = wait_for_end(run_id)
    assert run.status == Run.Status.CANCELLED and run.error_code == "run_cancelled"
    calls = list(ToolCall.objects.filter(message__run=run).order_by("index"))
    assert [c.status for c in calls] == [ToolCall.Status.SUCCEEDED, ToolCall.Status.CANCELLED]
    assert executions(tool_log) == ["first"]  # the running tool finished, the next never ran
    history = assert_valid_history(demo_conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool"]
    assert history[-2].content == "first done" and history[-1].content == CANCELLED

    again = api.post(reverse("conversations:run-cancel", args=[run_id]))
    assert again.status_code == 409 and again.json()["code"] == "run_not_running"


def test_recover_runs_requeue_publishes_lost_runs_again_and_interrupts_dead_ones(
    start, user, demo_conversation, tool_log
):
    # A run whose message was lost: started, never published, never claimed.
    lost = start_run(conversation=demo_conversation, content="What's the weather in Paris?")
    # A run whose worker died: claimed, then silent.
    other = Conversation.objects.create(owner=user, title="Dead", profile=demo_conversation.profile)
    dead = start_run(conversation=other, content="Hello")
    assert claim_run(run=dead)
    old = timezone.now() - timedelta(seconds=LEASE + 5)
    Run.objects.filter(pk__in=[lost.pk, dead.pk]).update(heartbeat_at=old)

    out = io.StringIO()
    call_command("recover_runs", "--requeue", stdout=out)
    assert f"requeued run {lost.pk}" in out.getvalue()
    assert f"interrupted run {dead.pk}" in out.getvalue()
    assert Run.objects.get(pk=dead.pk).status == Run.Status.INTERRUPTED

    start()
    run = wait_for_end(lost.pk)
    assert run.status == Run.Status.COMPLETED and run.claimed_at is not None
    assert_valid_history(demo_conversation)
