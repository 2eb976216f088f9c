"""Answers to tool calls: a ToolError's text reaches the model, and every non-success is flagged."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from conversations.domain import ChatMessage, Role, ToolCall
from conversations.models import LanguageModel, Message, Profile, Provider, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.demo import DemoProvider
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import (
    append_messages,
    cancel_run,
    execute_run,
    import_conversation,
    run_tool_loop,
    start_run,
)
from conversations.services.loop import claim_run
from conversations.services.loop.tool_calls import TOOL_ERROR, TOOL_FAILED
from conversations.tools import ToolError, registry, tool

pytestmark = pytest.mark.django_db


@pytest.fixture
def tools():
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def calculate(expression: str) -> str:
            """Refuses to divide by zero, on purpose."""
            if "/0" in expression:
                raise ToolError("division by zero")
            return "4"

        @tool(registry=r)
        def broken() -> str:
            """A bug: its exception text must stay hidden."""
            raise KeyError("SECRET-api-key-42")

        @tool(registry=r)
        def hidden() -> str:
            """Registered, but not allowed by the profile used below."""
            return "never"

        yield r


def results(conversation) -> list[Message]:
    return list(conversation.messages.filter(role=Role.TOOL.value).order_by("position"))


def test_a_tool_error_is_shown_to_the_model(conversation, tools):
    provider = ScriptedProvider(
        [
            scripted_calls(ToolCall(id="c1", name="calculate", arguments={"expression": "1/0"})),
            scripted_text("You cannot divide by zero."),
        ]
    )
    run = run_tool_loop(conversation=conversation, content="1/0?", provider=provider)
    assert run.status == Run.Status.COMPLETED
    expected = 'Error: tool "calculate" failed: division by zero'
    assert TOOL_ERROR.format(name="calculate", message="division by zero") == expected
    assert provider.requests[1].messages[-1] == ChatMessage.tool_result(
        "c1", expected, is_error=True
    )
    row = ToolCallRow.objects.get(call_id="c1")
    assert row.status == ToolCallRow.Status.FAILED
    assert "ToolError" in row.error  # the traceback stays for admins


def test_any_other_exception_keeps_the_fixed_text(conversation, tools):
    provider = ScriptedProvider(
        [scripted_calls(ToolCall(id="c1", name="broken", arguments={})), scripted_text("ok")]
    )
    run_tool_loop(conversation=conversation, content="?", provider=provider)
    sent = provider.requests[1].messages[-1]
    assert sent == ChatMessage.tool_result("c1", TOOL_FAILED.format(name="broken"), is_error=True)
    assert "SECRET" not in sent.content
    assert "SECRET-api-key-42" in ToolCallRow.objects.get(call_id="c1").error


def test_every_answer_that_is_not_a_success_is_flagged(conversation, tools):
    provider_record = Provider.objects.create(slug="p", name="p", adapter=Provider.Adapter.DEMO)
    model = LanguageModel.objects.create(provider=provider_record, model_id="demo")
    profile = Profile.objects.create(
        slug="p",
        name="p",
        language_model=model,
        allowed_tools=["calculate", "broken"],
    )
    calls = [
        ToolCall(id="ok", name="calculate", arguments={"expression": "2+2"}),
        ToolCall(id="unknown", name="nope", arguments={}),
        ToolCall(id="forbidden", name="hidden", arguments={}),
        ToolCall(id="invalid", name="calculate", arguments={"expression": 7}),
        ToolCall(id="raw", name="calculate", arguments={}, raw_arguments='{"expression": '),
        ToolCall(id="refused", name="calculate", arguments={"expression": "1/0"}),
        ToolCall(id="failed", name="broken", arguments={}),
    ]
    provider = ScriptedProvider([scripted_calls(*calls), scripted_text("done")])
    run_tool_loop(conversation=conversation, content="?", profile=profile, provider=provider)
    stored = {m.tool_call.call_id: m.is_error for m in results(conversation)}
    assert stored == {
        "ok": False,
        "unknown": True,
        "forbidden": True,
        "invalid": True,
        "raw": True,
        "refused": True,
        "failed": True,
    }
    # Read back into the history, and so sent to the model on the next request.
    history = {
        m.tool_call_id: m.is_error
        for m in get_history(conversation=conversation)
        if m.role is Role.TOOL
    }
    assert history == stored
    sent = {m.tool_call_id: m.is_error for m in provider.requests[1].messages if m.tool_call_id}
    assert sent == stored


@pytest.mark.django_db(transaction=True)  # the tool cancels from its worker thread
def test_interrupted_and_cancelled_answers_are_flagged(conversation, tools, settings):
    old = timezone.now() - timedelta(hours=1)
    dead = Run.objects.create(
        conversation=conversation, max_iterations=3, started_at=old, heartbeat_at=old
    )
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("first"),
            ChatMessage.assistant_tool_calls([ToolCall(id="lost", name="calculate")]),
        ],
        run=dead,
    )
    provider = ScriptedProvider([scripted_calls(ToolCall(id="later", name="calculate"))])
    run = start_run(conversation=conversation, content="again", provider=provider)
    assert claim_run(run=run)
    Run.objects.filter(pk=run.pk).update(claimed_at=None)
    run.refresh_from_db()
    cancel_run(run=run)  # unclaimed: ends at once
    execute_run(run=run, provider=provider)  # already ended: nothing runs
    answers = {m.tool_call.call_id: (m.is_error, m.content) for m in results(conversation)}
    assert answers == {
        "lost": (True, 'Error: tool "calculate" was interrupted and did not complete.'),
    }
    # A running run cancelled between tools answers the rest as cancelled (flagged).
    second = ScriptedProvider(
        [
            scripted_calls(
                ToolCall(id="a", name="calculate", arguments={"expression": "2"}),
                ToolCall(id="b", name="calculate", arguments={"expression": "3"}),
            )
        ]
    )
    with registry.isolated(empty=True) as r:
        # One call at a time, so the second starts only after the first cancelled.
        @tool(registry=r, name="calculate", concurrent=False)
        def cancelling(expression: str) -> str:
            """Asks its own run to stop, so the next call is never executed."""
            Run.objects.filter(status=Run.Status.RUNNING).update(cancel_requested=True)
            return "2"

        from conversations.services.loop import runs

        original, runs.CANCEL_CHECK_INTERVAL = runs.CANCEL_CHECK_INTERVAL, 0
        try:
            run = run_tool_loop(conversation=conversation, content="more", provider=second)
        finally:
            runs.CANCEL_CHECK_INTERVAL = original
    assert run.status == Run.Status.CANCELLED
    flagged = {m.tool_call.call_id: m.is_error for m in results(conversation)}
    assert flagged["a"] is False and flagged["b"] is True


def test_the_demo_model_sees_the_calculators_tool_error(conversation):
    assert registry.get("calculate") is not None  # the demo tools are installed
    provider = DemoProvider()
    run = run_tool_loop(conversation=conversation, content="What is 1/0?", provider=provider)
    assert run.status == Run.Status.COMPLETED
    history = get_history(conversation=conversation)
    assert [m.role for m in history] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert history[1].tool_calls[0].name == "calculate"
    assert history[2].content == 'Error: tool "calculate" failed: division by zero'
    assert history[2].is_error


def test_import_keeps_is_error(conversation, user):
    imported = import_conversation(
        owner=user,
        messages=[
            {"role": "user", "content": "1/0?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "calculate", "arguments": '{"expression": "1/0"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "division by zero", "is_error": True},
        ],
    )
    (answer,) = results(imported)
    assert answer.is_error
    assert get_history(conversation=imported)[-1].is_error
