"""The tool loop with a ScriptedProvider: outcomes, pinned texts, bounds, recovery, races."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Annotated

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from conversations import signals
from conversations.domain import ChatMessage, Role, ToolCall, Usage
from conversations.exceptions import ConversationBusy, ProviderRateLimited
from conversations.models import LanguageModel, Profile, Provider, Run, ToolSetting
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import run_tool_loop
from conversations.services.transcript.messages import append_messages, create_conversation
from conversations.tools import registry, tool

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls_made():
    return []


@pytest.fixture
def tools(calls_made):
    """A registry holding only the tools these tests define."""
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            calls_made.append(("add", a, b))
            return a + b

        @tool(registry=r)
        def boom(reason: Annotated[str, "why"] = "x") -> str:
            """Always fails."""
            calls_made.append(("boom", reason))
            raise RuntimeError("SECRET-token-123 leaked in the message")

        @tool(registry=r)
        def blob(size: int) -> str:
            """Return ``size`` bytes of text."""
            calls_made.append(("blob", size))
            return "x" * size

        @tool(registry=r)
        def now() -> str:
            """No arguments at all."""
            calls_made.append(("now",))
            return "12:00"

        yield r


def call(name, arguments=None, id=None, raw=None):
    return ToolCall(
        id=id or f"call_{name}_{abs(hash((name, str(arguments)))) % 10**8}",
        name=name,
        arguments=arguments or {},
        raw_arguments=raw,
    )


def tool_results(conversation):
    return [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]


def test_answer_without_tools(conversation, tools):
    provider = ScriptedProvider([scripted_text("Hello!", usage=Usage(10, 3))])
    run = run_tool_loop(conversation=conversation, content="Hi", provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert run.final_content == "Hello!"
    assert run.iterations == 1
    assert (run.prompt_tokens, run.completion_tokens, run.total_tokens) == (10, 3, 13)
    history = get_history(conversation=conversation)
    assert history == [ChatMessage.user("Hi"), ChatMessage.assistant("Hello!")]
    assert [m.run_id for m in conversation.messages.all()] == [run.pk, run.pk]


def test_one_call_then_answer(conversation, tools, calls_made):
    provider = ScriptedProvider(
        [scripted_calls(call("add", {"a": 2, "b": 3}, id="c1")), scripted_text("It is 5.")]
    )
    run = run_tool_loop(conversation=conversation, content="2+3?", provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert run.final_content == "It is 5."
    assert calls_made == [("add", 2, 3)]
    row = ToolCallRow.objects.get(call_id="c1")
    assert row.status == ToolCallRow.Status.SUCCEEDED
    assert row.started_at is not None and row.finished_at >= row.started_at
    second = provider.requests[1].messages
    assert second[-1] == ChatMessage.tool_result("c1", "5")
    assert {spec.name for spec in provider.requests[0].tools} == {"add", "boom", "blob", "now"}


def test_unknown_tool_is_answered_not_executed(conversation, tools, calls_made):
    provider = ScriptedProvider([scripted_calls(call("nope", {}, id="c1")), scripted_text("sorry")])
    run_tool_loop(conversation=conversation, content="?", provider=provider)
    (result,) = tool_results(conversation)
    assert result.content == 'Error: unknown tool "nope"'
    assert ToolCallRow.objects.get(call_id="c1").status == ToolCallRow.Status.REJECTED
    assert calls_made == []


def make_profile(**kwargs):
    provider = Provider.objects.create(slug="p", name="p", adapter=Provider.Adapter.DEMO)
    model = LanguageModel.objects.create(provider=provider, model_id="demo")
    return Profile.objects.create(slug="prof", name="prof", language_model=model, **kwargs)


def test_tool_not_allowed_by_profile_is_never_executed(conversation, tools, calls_made):
    profile = make_profile(allowed_tools=["add"])
    provider = ScriptedProvider([scripted_calls(call("now", id="c1")), scripted_text("ok")])
    run_tool_loop(conversation=conversation, content="?", profile=profile, provider=provider)
    assert tool_results(conversation)[0].content == 'Error: tool "now" not permitted'
    assert calls_made == []
    assert [s.name for s in provider.requests[0].tools] == ["add"]


def test_tool_disabled_by_admin_is_never_executed(conversation, tools, calls_made):
    ToolSetting.objects.create(name="add", enabled=False)
    provider = ScriptedProvider(
        [scripted_calls(call("add", {"a": 1, "b": 1}, id="c1")), scripted_text("ok")]
    )
    run_tool_loop(conversation=conversation, content="?", provider=provider)
    assert tool_results(conversation)[0].content == 'Error: tool "add" not permitted'
    assert calls_made == []
    assert "add" not in {s.name for s in provider.requests[0].tools}


def test_invalid_arguments_are_explained_not_executed(conversation, tools, calls_made):
    provider = ScriptedProvider(
        [scripted_calls(call("add", {"a": "two"}, id="c1")), scripted_text("ok")]
    )
    run_tool_loop(conversation=conversation, content="?", provider=provider)
    text = tool_results(conversation)[0].content
    assert text.startswith('Error: invalid arguments for tool "add": ')
    assert "b" in text and "'two'" in text
    assert calls_made == []
    assert ToolCallRow.objects.get(call_id="c1").status == ToolCallRow.Status.REJECTED


def test_raw_arguments_are_not_executed(conversation, tools, calls_made):
    provider = ScriptedProvider(
        [scripted_calls(call("add", raw='{"a": 1, "b"', id="c1")), scripted_text("ok")]
    )
    run_tool_loop(conversation=conversation, content="?", provider=provider)
    assert (
        tool_results(conversation)[0].content
        == 'Error: arguments for tool "add" are not a JSON object'
    )
    assert calls_made == []
    # Nothing the model sent is lost: the raw text is stored and replayed.
    assert ToolCallRow.objects.get(call_id="c1").raw_arguments == '{"a": 1, "b"'
    assert provider.requests[1].messages[-2].tool_calls[0].raw_arguments == '{"a": 1, "b"'


def test_exception_text_never_reaches_the_model(conversation, tools, calls_made, caplog):
    provider = ScriptedProvider([scripted_calls(call("boom", id="c1")), scripted_text("ok")])
    run = run_tool_loop(conversation=conversation, content="?", provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert tool_results(conversation)[0].content == 'Error: tool "boom" failed.'
    for request in provider.requests:
        for message in request.messages:
            assert "SECRET" not in message.to_json()
    row = ToolCallRow.objects.get(call_id="c1")
    assert row.status == ToolCallRow.Status.FAILED
    assert "SECRET-token-123" in row.error and "Traceback" in row.error  # for admins
    assert any(r.exc_info for r in caplog.records)  # the traceback is logged


def test_cap_ends_with_a_final_answer_without_tools(conversation, tools):
    provider = ScriptedProvider(
        [
            scripted_calls(call("now", id="c1"), usage=Usage(5, 1)),
            scripted_calls(call("now", id="c2"), usage=Usage(7, 1)),
            scripted_text("final", usage=Usage(11, 2, cached_prompt_tokens=4)),
        ]
    )
    run = run_tool_loop(conversation=conversation, content="?", provider=provider, max_iterations=2)
    assert run.status == Run.Status.MAX_ITERATIONS
    assert run.final_content == "final"
    assert run.iterations == 2
    assert len(provider.requests) == 3
    assert provider.requests[2].tools == ()
    assert provider.requests[2].options.tool_choice is None
    assert (run.prompt_tokens, run.completion_tokens, run.cached_prompt_tokens) == (23, 4, 4)
    assert run.total_tokens == 27


def test_calls_in_the_final_synthesis_are_answered(conversation, tools, calls_made):
    provider = ScriptedProvider(
        [scripted_calls(call("now", id="c1")), scripted_calls(call("now", id="c2"))]
    )
    run = run_tool_loop(conversation=conversation, content="?", provider=provider, max_iterations=1)
    assert run.status == Run.Status.MAX_ITERATIONS
    assert calls_made == [("now",)]
    assert tool_results(conversation)[-1] == ChatMessage.tool_result(
        "c2", 'Error: tool "now" not permitted', is_error=True
    )


def test_no_tools_offered_means_one_plain_completion(conversation):
    with registry.isolated(empty=True):
        provider = ScriptedProvider([scripted_text("plain")])
        run = run_tool_loop(conversation=conversation, content="?", provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert len(provider.requests) == 1
    assert provider.requests[0].tools == ()
    assert provider.requests[0].options.tool_choice is None


@pytest.mark.parametrize(
    ("size", "expected_bytes", "truncated"), [(50_000, 50_000, False), (60_005, 50_000, True)]
)
def test_results_are_bounded(conversation, tools, size, expected_bytes, truncated):
    provider = ScriptedProvider(
        [scripted_calls(call("blob", {"size": size}, id="c1")), scripted_text("ok")]
    )
    run_tool_loop(conversation=conversation, content="?", provider=provider)
    content = tool_results(conversation)[0].content
    assert len(content.encode("utf-8")) == expected_bytes
    assert content.endswith("\n…[tool result truncated at 50000 bytes]") is truncated


def test_provider_error_in_round_two_leaves_a_valid_history(conversation, tools):
    provider = ScriptedProvider(
        [
            scripted_calls(call("add", {"a": 1, "b": 2}, id="c1"), call("now", id="c2")),
            ProviderRateLimited("openai: rate limited (HTTP 429)", retry_after=3),
        ]
    )
    run = run_tool_loop(conversation=conversation, content="?", provider=provider)
    assert run.status == Run.Status.FAILED
    assert run.error_code == "provider_rate_limited"
    history = get_history(conversation=conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool"]
    assert {m.tool_call_id for m in history[2:]} == {"c1", "c2"}
    from tests.providers.replay import assert_every_adapter_accepts

    assert_every_adapter_accepts(history)


def test_tool_call_signals(conversation, tools):
    seen = []

    def started(sender, tool_call, run, **kwargs):
        seen.append(("started", tool_call.name))

    def finished(sender, tool_call, run, result, **kwargs):
        seen.append(("finished", tool_call.name, tool_call.status, result))

    def run_done(sender, run, **kwargs):
        seen.append(("run", run.status))

    signals.tool_call_started.connect(started)
    signals.tool_call_finished.connect(finished)
    signals.run_finished.connect(run_done)
    try:
        provider = ScriptedProvider(
            [scripted_calls(call("add", {"a": 1, "b": 1}, id="c1")), scripted_text("2")]
        )
        run_tool_loop(conversation=conversation, content="?", provider=provider)
    finally:
        signals.tool_call_started.disconnect(started)
        signals.tool_call_finished.disconnect(finished)
        signals.run_finished.disconnect(run_done)
    assert seen == [
        ("started", "add"),
        ("finished", "add", "succeeded", "2"),
        ("run", "completed"),
    ]


def test_crashed_run_is_recovered_without_reexecuting(conversation, tools, calls_made):
    # Simulate a process killed in the middle of a tool: a running run with an
    # old heartbeat and its call marked running, without a result.
    old = timezone.now() - timedelta(hours=1)
    dead = Run.objects.create(
        conversation=conversation, max_iterations=3, started_at=old, heartbeat_at=old
    )
    append_messages(conversation=conversation, messages=[ChatMessage.user("first")], run=dead)
    append_messages(
        conversation=conversation,
        messages=[ChatMessage.assistant_tool_calls([call("add", {"a": 1, "b": 1}, id="c1")])],
        run=dead,
    )
    ToolCallRow.objects.filter(call_id="c1").update(
        status=ToolCallRow.Status.RUNNING, started_at=old
    )

    provider = ScriptedProvider([scripted_text("fresh answer")])
    run = run_tool_loop(conversation=conversation, content="again", provider=provider)

    dead.refresh_from_db()
    assert dead.status == Run.Status.INTERRUPTED
    row = ToolCallRow.objects.get(call_id="c1")
    assert row.status == ToolCallRow.Status.INTERRUPTED
    assert calls_made == []  # never executed again
    history = get_history(conversation=conversation)
    assert history[2] == ChatMessage.tool_result(
        "c1", 'Error: tool "add" was interrupted and did not complete.', is_error=True
    )
    assert run.status == Run.Status.COMPLETED
    assert provider.requests[0].messages[-1] == ChatMessage.user("again")


def test_live_run_makes_the_conversation_busy(conversation, tools):
    Run.objects.create(conversation=conversation, max_iterations=3)
    provider = ScriptedProvider([scripted_text("never")])
    with pytest.raises(ConversationBusy) as info:
        run_tool_loop(conversation=conversation, content="?", provider=provider)
    assert info.value.code == "conversation_busy"
    assert provider.requests == []
    assert conversation.messages.count() == 0  # the busy request stored nothing


def test_queries_per_round_do_not_grow_with_calls(user, tools, monkeypatch):
    from django.test.utils import CaptureQueriesContext

    from conversations.services.loop import runs

    # Between tools the cancel flag is read at most every interval: a slow
    # machine would pay one more query for the longer turn. Counted here: structure.
    monkeypatch.setattr(runs, "CANCEL_CHECK_INTERVAL", 3600.0)
    counts = {}
    for k in (1, 10):
        conversation = create_conversation(owner=user, title=f"k={k}")
        provider = ScriptedProvider(
            [
                scripted_calls(*[call("now", id=f"k{k}_c{i}") for i in range(k)]),
                scripted_text("done"),
            ]
        )
        with CaptureQueriesContext(connection) as captured:
            run_tool_loop(conversation=conversation, content="?", provider=provider)
        counts[k] = len(captured.captured_queries)
    assert counts[1] == counts[10], counts


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_threads_start_runs_exactly_one_runs(tools):
    owner = get_user_model().objects.create_user("racer")
    conversation = create_conversation(owner=owner)
    barrier = threading.Barrier(2)
    release = threading.Event()
    outcomes: list[object] = []

    def slow_answer(messages, tools_, options):
        release.wait(10)
        return scripted_text("done")

    def worker():
        from django.db import connection as thread_connection

        provider = ScriptedProvider([slow_answer])
        try:
            barrier.wait(5)
            outcomes.append(
                run_tool_loop(conversation=conversation, content="hi", provider=provider)
            )
        except ConversationBusy as exc:
            outcomes.append(exc)
            release.set()
        finally:
            thread_connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    busy = [o for o in outcomes if isinstance(o, ConversationBusy)]
    runs = [o for o in outcomes if isinstance(o, Run)]
    assert len(busy) == 1 and len(runs) == 1
    assert runs[0].status == Run.Status.COMPLETED
    assert [m.role for m in get_history(conversation=conversation)] == ["user", "assistant"]


def test_an_unexpected_error_is_raised_after_the_run_is_recorded(conversation, tools):
    provider = ScriptedProvider(
        [scripted_calls(call("now", id="c1")), RuntimeError("a bug in an adapter")]
    )
    with pytest.raises(RuntimeError, match="a bug in an adapter"):
        run_tool_loop(conversation=conversation, content="?", provider=provider)
    run = Run.objects.get(conversation=conversation)
    assert run.status == Run.Status.FAILED
    assert (run.error_code, run.error_message) == ("internal_error", "RuntimeError")
    assert run.finished_at is not None
    # The conversation stays usable: the next turn runs.
    follow_up = ScriptedProvider([scripted_text("recovered")])
    assert run_tool_loop(conversation=conversation, content="again", provider=follow_up).status == (
        Run.Status.COMPLETED
    )


def test_a_configuration_error_ends_the_run_failed(conversation, tools):
    profile = make_profile()
    profile.language_model.provider.adapter = Provider.Adapter.OPENAI
    profile.language_model.provider.api_key_ref = "env:CONV_TEST_UNSET_KEY"
    profile.language_model.provider.save()
    from conversations.exceptions import ConfigurationError
    from conversations.services import execute_run, start_run

    run = start_run(
        conversation=conversation, content="hi", profile=profile, provider=ScriptedProvider()
    )
    with pytest.raises(ConfigurationError):
        execute_run(run=run)
    run.refresh_from_db()
    assert (run.status, run.error_code) == (Run.Status.FAILED, "configuration_error")
    assert "CONV_TEST_UNSET_KEY" in run.error_message
