"""A worker killed while a sub-agent's tool runs: recovery ends both runs, no tool runs twice.

The parent and its agent's child run in the same worker process (the child
runs inside the parent's agent call). Both speak the offline demo model: the
parent's message makes it call ``agent_sub`` with a task that makes the child
call ``slow_step``, whose body writes a line to a file each time it starts.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from conversations.models import Conversation, Profile, Run, ToolCall
from conversations.selectors import get_history
from tests.providers.replay import assert_every_adapter_accepts

from .test_workers import LEASE, executions, post, wait_until, wait_until_stale

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def celery_executor(settings):
    settings.CONVERSATIONS = {
        "EXECUTOR": "celery",
        "RUN_LEASE_SECONDS": LEASE,
        "MESSAGE_THROTTLE_RATE": None,
    }


def test_a_worker_killed_in_a_childs_tool_ends_parent_and_child_and_runs_nothing_twice(
    workers, user, profile, tmp_path
):
    from rest_framework.test import APIClient

    tool_log = tmp_path / "tool-executions.log"
    sub = Profile.objects.create(slug="sub", name="Sub", language_model=profile.language_model)
    profile.agents.add(sub)
    conversation = Conversation.objects.create(owner=user, profile=profile)
    api = APIClient()
    api.force_authenticate(user)
    worker = workers(WORKER_TOOL_LOG=str(tool_log), CONVERSATIONS_RUN_LEASE_SECONDS=str(LEASE))
    task = "/call slow_step " + json.dumps({"label": "kill-me", "seconds": 30})

    response = post(api, conversation, "/call agent_sub " + json.dumps({"task": task}))
    assert response.status_code == 202, response.content
    parent_id = response.json()["run"]["id"]
    wait_until(lambda: executions(tool_log) == ["kill-me"], message="the child's tool to start")
    child = Run.objects.get(parent_run_id=parent_id)
    worker.kill()
    wait_until_stale(parent_id)
    wait_until_stale(child.pk)
    out = io.StringIO()
    call_command("recover_runs", stdout=out)

    parent, child = Run.objects.get(pk=parent_id), Run.objects.get(pk=child.pk)
    assert (parent.status, child.status) == (Run.Status.INTERRUPTED, Run.Status.INTERRUPTED)
    calls = {c.name: c.status for c in ToolCall.objects.filter(message__run__in=[parent, child])}
    assert calls == {"agent_sub": "interrupted", "slow_step": "interrupted"}
    for ended in (parent, child):
        assert_every_adapter_accepts(get_history(conversation=ended.conversation))
    # The unacknowledged message comes back to the next worker, which finds the run ended.
    second = workers(
        WORKER_TOOL_LOG=str(tool_log),
        CONVERSATIONS_RUN_LEASE_SECONDS=str(LEASE),
        CELERY_VISIBILITY_TIMEOUT="1",
    )
    second.wait_for("succeeded")
    assert "'ended'" in second.output()
    assert executions(tool_log) == ["kill-me"]  # never executed again
