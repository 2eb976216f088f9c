"""The run lifecycle around the loop: starting, claiming, cancelling, and the inline executor."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import IntegrityError, OperationalError, transaction
from django.utils import timezone

from conversations.domain import ChatMessage, Role, ToolCall
from conversations.exceptions import (
    ConversationBusy,
    InvalidArgumentError,
    RunAlreadyClaimed,
    RunNotRunning,
)
from conversations.models import (
    ApprovalPolicy,
    Budget,
    Conversation,
    Message,
    Run,
    ToolApproval,
    ToolSetting,
)
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import append_messages, execute_run, run_tool_loop
from conversations.services.loop import heartbeat as heartbeat_module
from conversations.services.loop.executors import submit_run
from conversations.services.loop.heartbeat import Heartbeat
from conversations.services.loop.runs import (
    CANCEL_CHECK_INTERVAL,
    cancel_run,
    claim_run,
    start_run,
    worker_name,
)
from conversations.tools import ToolContext, registry, tool
from tests.providers.replay import assert_every_adapter_accepts

pytestmark = pytest.mark.django_db

CANCELLED = 'Error: tool "{}" was cancelled and did not complete.'


@pytest.fixture
def executed():
    return []


@pytest.fixture
def tools(executed):
    """``note`` records its calls; ``cancel_me`` cancels its own run, then takes a while."""
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def note(text: str) -> str:
            """Remember ``text``."""
            executed.append(text)
            return f"noted {text}"

        @tool(registry=r)
        def cancel_me(context: ToolContext) -> str:
            """Cancel the run this call belongs to, as another request would."""
            executed.append("cancel_me")
            cancel_run(run=Run.objects.get(pk=context.run_id))
            # Long enough for the loop's cancellation check between tools.
            time.sleep(CANCEL_CHECK_INTERVAL + 0.05)
            return "asked to stop"

        yield r


def roles(conversation):
    return [m.role.value for m in get_history(conversation=conversation)]


# Claiming --------------------------------------------------------------------------------


def test_a_run_is_claimed_once(conversation):
    run = start_run(conversation=conversation, content="hi", provider=ScriptedProvider())
    assert run.claimed_at is None and run.worker == ""
    assert claim_run(run=run) is True
    assert claim_run(run=Run.objects.get(pk=run.pk)) is False
    run.refresh_from_db()
    assert run.claimed_at is not None and run.worker == worker_name()
    assert run.heartbeat_at == run.claimed_at  # the lease starts with the claim


def test_a_claim_refreshes_the_heartbeat_of_a_run_that_waited(conversation):
    run = start_run(conversation=conversation, content="hi", provider=ScriptedProvider())
    old = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=old)
    assert claim_run(run=run)
    assert Run.objects.get(pk=run.pk).heartbeat_at > old


def test_an_ended_run_cannot_be_claimed(conversation, tools):
    run = run_tool_loop(
        conversation=conversation, content="hi", provider=ScriptedProvider([scripted_text("yo")])
    )
    Run.objects.filter(pk=run.pk).update(claimed_at=None, worker="")
    assert claim_run(run=run) is False


def test_the_database_refuses_a_claim_without_a_worker(conversation):
    run = start_run(conversation=conversation, content="hi", provider=ScriptedProvider())
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(claimed_at=timezone.now(), worker="")


def test_executing_a_run_twice_never_runs_it_again(conversation, tools, executed):
    provider = ScriptedProvider([scripted_calls(("note", {"text": "a"})), scripted_text("done")])
    run = start_run(conversation=conversation, content="hi", provider=provider)
    execute_run(run=run, provider=provider)
    again = execute_run(run=Run.objects.get(pk=run.pk), provider=ScriptedProvider())
    assert again.status == Run.Status.COMPLETED and again.final_content == "done"
    assert executed == ["a"]


def test_executing_a_run_another_process_claimed_raises(conversation):
    run = start_run(conversation=conversation, content="hi", provider=ScriptedProvider())
    Run.objects.filter(pk=run.pk).update(claimed_at=timezone.now(), worker="elsewhere:1")
    provider = ScriptedProvider()
    with pytest.raises(RunAlreadyClaimed) as info:
        execute_run(run=run, provider=provider)
    assert info.value.code == "run_already_claimed"
    assert provider.requests == []
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING


def test_the_inline_executor_runs_the_loop_in_this_process(conversation, profile):
    run = start_run(conversation=conversation, content="What's the weather in Paris?")
    submit_run(run)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.worker == worker_name()
    assert roles(conversation) == ["user", "assistant", "tool", "assistant"]


# Starting --------------------------------------------------------------------------------


def test_a_start_refused_before_any_write_stores_nothing(conversation):
    with pytest.raises(InvalidArgumentError) as info:
        start_run(conversation=conversation, content=5, provider=ScriptedProvider())
    assert info.value.field == "content"
    assert not Run.objects.exists() and not conversation.messages.exists()


def test_a_start_that_fails_midway_stores_neither_the_run_nor_the_message(conversation):
    Conversation.objects.filter(pk=conversation.pk).delete()
    with pytest.raises(ConversationBusy):
        run_tool_loop(conversation=conversation, content="hi", provider=ScriptedProvider())
    assert not Run.objects.exists() and not Message.objects.exists()


def test_calls_left_open_without_a_run_are_answered_when_the_next_run_starts(conversation):
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("first"),
            ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="note")]),
        ],
    )
    provider = ScriptedProvider([scripted_text("fresh")])
    run = run_tool_loop(conversation=conversation, content="again", provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert roles(conversation) == ["user", "assistant", "tool", "user", "assistant"]
    assert ToolCallRow.objects.get(call_id="c1").status == ToolCallRow.Status.INTERRUPTED
    assert provider.requests[0].messages[-1] == ChatMessage.user("again")
    assert_every_adapter_accepts(provider.requests[0].messages)


def test_a_run_started_for_a_worker_reads_no_message_text(conversation):
    """Its executor reads the history; the start needs only the conversation's end."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries_of_a_start(turns: int) -> list[str]:
        messages = []
        for turn in range(turns):
            messages += [
                ChatMessage.user(f"question {turn}"),
                ChatMessage.assistant_tool_calls([ToolCall(id=f"c{turns}_{turn}", name="note")]),
                ChatMessage.tool_result(f"c{turns}_{turn}", "noted"),
                ChatMessage.assistant(f"answer {turn}"),
            ]
        append_messages(conversation=conversation, messages=messages)
        with CaptureQueriesContext(connection) as captured:
            run = start_run(conversation=conversation, content="next", provider=ScriptedProvider())
        run.status, run.finished_at = Run.Status.COMPLETED, timezone.now()
        run.save(update_fields=["status", "finished_at"])
        return [query["sql"] for query in captured.captured_queries]

    few, many = queries_of_a_start(1), queries_of_a_start(25)
    assert len(few) == len(many)
    reads = [sql for sql in many if sql.lstrip().upper().startswith("SELECT")]
    assert reads and not any('"content"' in sql or '"provider_metadata"' in sql for sql in reads)
    assert Message.objects.filter(conversation=conversation).last().content == "next"


def test_a_run_started_for_a_worker_answers_calls_left_open(conversation):
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("first"),
            ChatMessage.assistant_tool_calls(
                [ToolCall(id="c1", name="note"), ToolCall(id="c2", name="note")]
            ),
            ChatMessage.tool_result("c1", "done"),
        ],
    )
    run = start_run(conversation=conversation, content="again", provider=ScriptedProvider())
    assert roles(conversation) == ["user", "assistant", "tool", "tool", "user"]
    assert ToolCallRow.objects.get(call_id="c2").status == ToolCallRow.Status.INTERRUPTED
    provider = ScriptedProvider([scripted_text("fresh")])
    assert execute_run(run=run, provider=provider).status == Run.Status.COMPLETED
    sent = provider.requests[0].messages
    assert sent[-1] == ChatMessage.user("again") and len(sent) == 5
    assert_every_adapter_accepts(sent)


def test_the_tool_settings_read_at_the_start_decide_the_run(conversation, tools, executed):
    ToolSetting.objects.create(name="cancel_me", enabled=False)
    ToolSetting.objects.create(name="note", approval=ApprovalPolicy.STAFF)
    provider = ScriptedProvider([scripted_calls(("note", {"text": "a"}))])
    run = run_tool_loop(conversation=conversation, content="hi", provider=provider)
    assert [spec.name for spec in provider.requests[0].tools] == ["note"]
    assert run.status == Run.Status.AWAITING_APPROVAL and executed == []
    assert ToolApproval.objects.get(run=run).level == ToolApproval.Level.STAFF


def test_a_budget_read_at_the_start_refuses_the_first_model_call(conversation, user):
    Budget.objects.create(
        name="none left", scope=Budget.Scope.USER, user=user, period="day", token_limit=0
    )
    provider = ScriptedProvider([scripted_text("never")])
    run = run_tool_loop(conversation=conversation, content="hi", provider=provider)
    assert run.status == Run.Status.BUDGET_EXHAUSTED and provider.requests == []


# Cancelling ------------------------------------------------------------------------------


def test_cancelling_a_queued_run_ends_it_at_once(conversation):
    run = start_run(conversation=conversation, content="hi", provider=ScriptedProvider())
    cancelled = cancel_run(run=run)
    assert cancelled.status == Run.Status.CANCELLED and cancelled.error_code == "run_cancelled"
    assert cancelled.cancel_requested and cancelled.finished_at is not None
    # A worker receiving it afterwards does nothing.
    provider = ScriptedProvider()
    assert execute_run(run=run, provider=provider).status == Run.Status.CANCELLED
    assert provider.requests == []
    assert roles(conversation) == ["user"]


def test_cancelling_an_ended_run_is_refused(conversation, tools):
    run = run_tool_loop(
        conversation=conversation, content="hi", provider=ScriptedProvider([scripted_text("yo")])
    )
    with pytest.raises(RunNotRunning) as info:
        cancel_run(run=run)
    assert info.value.code == "run_not_running"
    assert not Run.objects.get(pk=run.pk).cancel_requested


def test_a_claimed_run_is_only_flagged(conversation):
    run = start_run(conversation=conversation, content="hi", provider=ScriptedProvider())
    claim_run(run=run)
    flagged = cancel_run(run=run)
    assert flagged.status == Run.Status.RUNNING and flagged.cancel_requested


def test_cancelled_before_the_next_model_call(conversation, tools, executed):
    provider = ScriptedProvider(
        [scripted_calls(("note", {"text": "a"})), scripted_text("never asked")]
    )

    def cancel_on_result(sender, tool_call, run, result, **kwargs):
        cancel_run(run=run)

    from conversations import signals

    signals.tool_call_finished.connect(cancel_on_result)
    try:
        run = run_tool_loop(conversation=conversation, content="hi", provider=provider)
    finally:
        signals.tool_call_finished.disconnect(cancel_on_result)
    assert run.status == Run.Status.CANCELLED and run.error_code == "run_cancelled"
    assert len(provider.requests) == 1  # the model was not asked again
    assert executed == ["a"]
    assert roles(conversation) == ["user", "assistant", "tool"]
    assert_every_adapter_accepts(get_history(conversation=conversation))


@pytest.mark.django_db(transaction=True)  # the tool cancels from its worker thread
def test_cancelled_between_tools_answers_the_rest_as_cancelled(
    conversation, tools, executed, settings
):
    settings.CONVERSATIONS = {"TOOL_CONCURRENCY": 1}  # one call at a time, in order
    provider = ScriptedProvider(
        [
            scripted_calls(("cancel_me", {}), ("note", {"text": "b"}), ("nope", {})),
            scripted_text("never asked"),
        ]
    )
    run = run_tool_loop(conversation=conversation, content="hi", provider=provider)
    assert run.status == Run.Status.CANCELLED
    assert executed == ["cancel_me"]  # the running tool finished; the next never started
    calls = list(ToolCallRow.objects.filter(message__run=run).order_by("index"))
    assert [c.status for c in calls] == [
        ToolCallRow.Status.SUCCEEDED,
        ToolCallRow.Status.CANCELLED,
        ToolCallRow.Status.REJECTED,
    ]
    # A call marked running keeps that time even though it never ran; a rejected one has none.
    assert calls[1].started_at is not None and calls[2].started_at is None
    history = get_history(conversation=conversation)
    assert [m.role for m in history] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.TOOL]
    assert history[3] == ChatMessage.tool_result(
        calls[1].call_id, CANCELLED.format("note"), is_error=True
    )
    assert len(provider.requests) == 1
    assert_every_adapter_accepts(history)


@pytest.mark.django_db(transaction=True)
def test_a_failed_heartbeat_does_not_stop_the_next_ones(demo_conversation, monkeypatch):
    run = start_run(conversation=demo_conversation, content="hi")
    old = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=old)
    calls: list[int] = []
    real = heartbeat_module.fenced

    def flaky(target):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("couldn't get a connection after 10.00 sec")
        return real(target)

    monkeypatch.setattr(heartbeat_module, "fenced", flaky)
    with Heartbeat(run, interval=0.05):
        deadline = time.monotonic() + 20
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(calls) >= 3  # it went on beating after the failure
    run.refresh_from_db()
    assert run.heartbeat_at > old
