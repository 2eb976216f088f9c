"""A run whose lease expired while its process was alive never writes again (fencing)."""

from __future__ import annotations

import io
import logging
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from conversations.domain import ChatMessage, Role, ToolCall
from conversations.models import Message, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.selectors import get_history
from conversations.services import recover_runs, run_tool_loop
from conversations.services.loop.recovery import MIN_LEASE_SECONDS
from conversations.services.loop.runs import claim_run, finish_run, start_run
from conversations.services.loop.tool_calls import CallOutcome, persist_outcomes
from conversations.services.transcript.messages import append_messages

pytestmark = pytest.mark.django_db


def later():
    """A moment past every lease: recovery then takes any running run for dead."""
    return timezone.now() + timedelta(days=1)


def test_a_stale_run_neither_answers_the_new_runs_call_nor_rewrites_itself(conversation, caplog):
    newer: dict[str, object] = {}

    def paused_then_answers(messages, tools, options):
        # While the first run waits on its provider, its lease expires: recovery
        # ends it, and a second run starts and asks for a tool.
        (stale,) = recover_runs(now=later())
        newer["stale"] = stale
        run = start_run(conversation=conversation, content="Second", provider=provider)
        assert claim_run(run=run)
        (message,) = append_messages(
            conversation=conversation,
            messages=[ChatMessage.assistant_tool_calls([ToolCall(id="new", name="add")])],
            run=run,
        )
        (call,) = message.tool_calls.all()
        newer["run"], newer["call"] = run, call
        return scripted_text("the stale answer")

    provider = ScriptedProvider([paused_then_answers])
    with caplog.at_level(logging.WARNING, logger="conversations.tool_loop"):
        first = run_tool_loop(conversation=conversation, content="First", provider=provider)

    # The first run stopped without writing: still as recovery left it.
    assert first.status == Run.Status.INTERRUPTED
    assert first.error_code == "interrupted"
    assert not Message.objects.filter(run=first, role=Role.ASSISTANT).exists()
    assert "fenced out" in caplog.text
    # The second run's call is still open: its real result can be stored.
    second, call = newer["run"], newer["call"]
    assert call.status == ToolCallRow.Status.PENDING
    assert not call.results.exists()
    now = timezone.now()
    persist_outcomes(
        run=second,
        outcomes=[CallOutcome(call, ToolCallRow.Status.SUCCEEDED, "42", started_at=now)],
    )
    finish_run(run=second, status=Run.Status.COMPLETED, final_content="done")
    second.refresh_from_db()
    call.refresh_from_db()
    assert second.status == Run.Status.COMPLETED
    assert call.status == ToolCallRow.Status.SUCCEEDED
    results = [m.content for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    assert results == ["42"]


def test_finish_run_of_a_run_ended_by_recovery_writes_nothing(conversation):
    run = start_run(conversation=conversation, content="Hi", provider=ScriptedProvider())
    assert claim_run(run=run)
    recover_runs(now=later())
    returned = finish_run(run=run, status=Run.Status.FAILED, error_code="internal_error")
    assert returned.status == Run.Status.INTERRUPTED
    assert Run.objects.get(pk=run.pk).error_code == "interrupted"


def test_a_run_held_by_another_claim_is_fenced_too(conversation):
    run = start_run(conversation=conversation, content="Hi", provider=ScriptedProvider())
    assert claim_run(run=run)
    impostor = Run.objects.get(pk=run.pk)
    impostor.claimed_at = run.claimed_at - timedelta(seconds=1)
    finish_run(run=impostor, status=Run.Status.COMPLETED)
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING


@pytest.mark.parametrize("lease", ["0", str(MIN_LEASE_SECONDS - 1)])
def test_recover_runs_refuses_a_lease_below_the_minimum(lease):
    with pytest.raises(CommandError, match=f"at least {MIN_LEASE_SECONDS}"):
        call_command("recover_runs", "--lease", lease, stdout=io.StringIO())


def test_recover_runs_accepts_the_minimum_lease():
    out = io.StringIO()
    call_command("recover_runs", "--lease", str(MIN_LEASE_SECONDS), stdout=out)
    assert "0 run(s) recovered" in out.getvalue()
