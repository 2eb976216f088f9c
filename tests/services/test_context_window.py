"""The loop sends each call a view of the history that fits the model's context window."""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.domain import ChatMessage, Role, ToolCall, Usage
from conversations.domain.context import FAMILY_TOKEN_FACTORS, estimate_message_tokens
from conversations.exceptions import ProviderConnectionError, ProviderError
from conversations.models import (
    Budget,
    BudgetCounter,
    ContextSummary,
    LanguageModel,
    Message,
    ModelCall,
    Profile,
    Provider,
    Run,
)
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import history_and_tail
from conversations.services import append_messages, run_tool_loop
from conversations.services.loop import summaries
from conversations.services.loop.context import context_window_for, read_bound
from conversations.services.usage.budgets import period_bounds
from conversations.tools import registry, tool
from tests.providers.mock_http import Recorder

pytestmark = pytest.mark.django_db

WINDOW = 2000
"""Tokens: with 256 written and the margin, about 1,600 are left for the history."""


@pytest.fixture(autouse=True)
def no_tools():
    """No tool is offered unless a test registers one: the budgets here are counted without."""
    with registry.isolated(empty=True):
        yield


@pytest.fixture
def windowed(profile):
    """The demo profile on a model with a small context window."""
    model = profile.language_model
    model.context_window = WINDOW
    model.save()
    return profile


def fill(conversation, *, turns: int, size: int = 400) -> None:
    """``turns`` user/assistant pairs of about ``size`` estimated tokens each message."""
    text = "w" * (size * 4)
    messages = []
    for index in range(turns):
        messages += [ChatMessage.user(f"{index} {text}"), ChatMessage.assistant(f"{index} {text}")]
    append_messages(conversation=conversation, messages=messages)


def stored(conversation) -> list[tuple]:
    return list(
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .values_list("position", "role", "content", "provider_metadata", "token_estimate")
    )


def unpaired(messages) -> list[str]:
    """Calls without a result and results without a call in what was sent."""
    calls = {c.id for m in messages for c in m.tool_calls or ()}
    results = {m.tool_call_id for m in messages if m.role is Role.TOOL}
    return sorted(calls ^ results)


def test_each_message_gets_its_token_estimate_when_it_is_stored(demo_conversation):
    call = ToolCall(id="c1", name="lookup", arguments={"q": "weather"})
    items = [
        ChatMessage.user("How is the weather in Leipzig today?"),
        ChatMessage.assistant_tool_calls([call]),
        ChatMessage.tool_result("c1", "sunny, 21 degrees"),
    ]
    rows = append_messages(conversation=demo_conversation, messages=items)
    assert [row.token_estimate for row in rows] == [estimate_message_tokens(m) for m in items]
    assert list(
        Message.objects.filter(conversation=demo_conversation)
        .order_by("position")
        .values_list("token_estimate", flat=True)
    ) == [estimate_message_tokens(m) for m in items]


def test_a_long_history_is_sent_as_its_newest_whole_turns_with_the_system_prompt(
    demo_conversation, windowed
):
    fill(demo_conversation, turns=6)  # about 4,800 tokens: three times the budget
    before = stored(demo_conversation)
    provider = ScriptedProvider([scripted_text("Noted.")])
    run = run_tool_loop(conversation=demo_conversation, content="And now?", provider=provider)
    assert run.status == Run.Status.COMPLETED
    (request,) = provider.requests
    sent = request.messages
    assert sent[0].role is Role.SYSTEM and sent[0].content == windowed.system_prompt
    assert sent[1].role is Role.USER  # a whole turn starts the view
    assert sent[-1].content == "And now?"
    context = context_window_for(windowed)
    assert context is not None
    total = sum(estimate_message_tokens(m) for m in sent) * FAMILY_TOKEN_FACTORS["openai"]
    assert total <= WINDOW - context.output
    call = ModelCall.objects.get(run=run)
    first = Message.objects.get(
        conversation=demo_conversation, content=sent[1].content, role=Role.USER.value
    )
    assert call.first_position == first.position > 0
    # The stored history is untouched: the same rows, byte for byte, plus the new turn.
    assert stored(demo_conversation)[: len(before)] == before
    assert Message.objects.filter(conversation=demo_conversation).count() == len(before) + 2


def test_a_history_that_fits_is_sent_whole_and_the_call_records_position_zero(
    demo_conversation, windowed
):
    fill(demo_conversation, turns=1, size=50)
    provider = ScriptedProvider([scripted_text("Noted.")])
    run = run_tool_loop(conversation=demo_conversation, content="Hi", provider=provider)
    assert len(provider.requests[0].messages) == 1 + 3
    assert ModelCall.objects.get(run=run).first_position == 0


def test_a_turn_of_tool_rounds_keeps_every_call_with_its_result(demo_conversation, windowed):
    fill(demo_conversation, turns=3)
    with registry.isolated(empty=True) as tools:  # nested: this test's tool only

        @tool(registry=tools)
        def lookup(query: str) -> str:
            """Look something up."""
            return "r" * 2400  # about 600 tokens a result

        windowed.allowed_tools = None
        windowed.save()
        provider = ScriptedProvider(
            [scripted_calls(("lookup", {"query": "a"})), scripted_text("Done.")]
        )
        run = run_tool_loop(conversation=demo_conversation, content="Look.", provider=provider)
    assert run.status == Run.Status.COMPLETED, run.error_message
    for request in provider.requests:
        assert request.messages[0].role is Role.SYSTEM
        assert request.messages[1].role is Role.USER
        assert unpaired(request.messages) == []
    # The second call still holds the call and its result (the newest turn is whole).
    assert provider.requests[1].messages[-1].role is Role.TOOL
    positions = list(ModelCall.objects.filter(run=run).values_list("first_position", flat=True))
    assert all(p is not None and p > 0 for p in positions)


def test_a_message_larger_than_the_budget_fails_the_run_before_any_call(
    demo_conversation, windowed
):
    provider = ScriptedProvider([scripted_text("never asked")])
    run = run_tool_loop(conversation=demo_conversation, content="x" * (4 * 3000), provider=provider)
    assert run.status == Run.Status.FAILED
    assert run.error_code == "context_too_large"
    assert "position 0" in run.error_message and "tokens" in run.error_message
    assert provider.requests == []
    assert not ModelCall.objects.filter(run=run).exists()
    assert Message.objects.get(conversation=demo_conversation).content == "x" * (4 * 3000)


def test_the_fail_strategy_ends_the_run_instead_of_leaving_turns_out(demo_conversation, windowed):
    windowed.context_strategy = "fail"
    windowed.save()
    fill(demo_conversation, turns=6)
    provider = ScriptedProvider([scripted_text("never asked")])
    run = run_tool_loop(conversation=demo_conversation, content="And now?", provider=provider)
    assert (run.status, run.error_code) == (Run.Status.FAILED, "context_too_large")
    assert "strategy is fail" in run.error_message
    assert provider.requests == []


def test_the_last_recorded_call_calibrates_the_next_runs_view(demo_conversation, windowed):
    fill(demo_conversation, turns=2, size=300)
    # The provider says the first run's request was twice the estimate.
    first = ScriptedProvider([lambda messages, tools, options: _reporting(messages, 2.0)])
    run_tool_loop(conversation=demo_conversation, content="One", provider=first)
    assert len(first.requests[0].messages) == 1 + 5  # everything fitted, estimated
    second = ScriptedProvider([scripted_text("Two.")])
    run_tool_loop(conversation=demo_conversation, content="Two", provider=second)
    sent = second.requests[0].messages
    # Twice as big as estimated: only the newest turns fit now.
    assert len(sent) < 1 + 7
    assert sent[1].role is Role.USER and unpaired(sent) == []


def _reporting(messages, factor: float):
    estimate = sum(estimate_message_tokens(m) for m in messages)
    return scripted_text("Noted.", usage=Usage(int(estimate * factor), 5))


@pytest.mark.parametrize("turns", [5, 5000])
def test_choosing_the_view_reads_one_query_and_only_the_rows_it_may_send(
    demo_conversation, windowed, turns
):
    fill(demo_conversation, turns=turns, size=20)
    bound = read_bound(windowed)
    assert bound is not None
    with CaptureQueriesContext(connection) as captured:
        history, tail = history_and_tail(
            conversation=demo_conversation, profile=windowed, within=bound
        )
    assert len(captured) == 1
    # At most the bound's worth of 24-token messages (system prompt first), whatever the length.
    assert len(history) - 1 <= bound // 24 + 2
    assert tail.last_position == 2 * turns - 1
    assert tail.first_position == 2 * turns - (len(history) - 1)
    if turns == 5:
        assert tail.first_position == 0


@pytest.fixture
def summarizing(windowed, provider):
    """``windowed`` with the summarize strategy; summaries by a priced demo profile."""
    model = LanguageModel.objects.create(
        provider=provider,
        model_id="summary-model",
        input_price_per_million=Decimal("1"),
        output_price_per_million=Decimal("2"),
    )
    summarizer = Profile.objects.create(slug="summaries", name="Summaries", language_model=model)
    windowed.context_strategy = "summarize"
    windowed.summary_profile = summarizer
    windowed.save()
    return summarizer


def test_summarize_stores_one_summary_and_reuses_it_on_the_next_turn(
    demo_conversation, windowed, summarizing
):
    fill(demo_conversation, turns=6)  # about three budgets
    before = stored(demo_conversation)
    provider = ScriptedProvider([scripted_text("First."), scripted_text("Second.")])
    first = run_tool_loop(conversation=demo_conversation, content="One?", provider=provider)
    second = run_tool_loop(conversation=demo_conversation, content="Two?", provider=provider)
    assert first.status == second.status == Run.Status.COMPLETED
    (summary,) = ContextSummary.objects.filter(conversation=demo_conversation)
    assert summary.first_position == 0 and summary.model == "summary-model"
    # Its call is in the ledger under the summary profile, priced, charged to the first run.
    made = summary.model_call
    assert (made.profile, made.model, made.run) == (summarizing, "summary-model", first)
    assert made.cost is not None and made.cost > 0
    assert ModelCall.objects.filter(profile=summarizing).count() == 1  # two turns, one summary
    for run, request in zip((first, second), provider.requests, strict=True):
        call = ModelCall.objects.get(run=run, profile=windowed)
        assert call.context_summary == summary
        assert call.first_position == summary.last_position + 1
        system = request.messages[0]
        assert system.content.startswith(windowed.system_prompt)
        assert summary.content in system.content
        assert request.messages[1].role is Role.USER and unpaired(request.messages) == []
    assert stored(demo_conversation)[: len(before)] == before


def test_a_history_that_fits_needs_no_summary(demo_conversation, windowed, summarizing):
    fill(demo_conversation, turns=1, size=50)
    provider = ScriptedProvider([scripted_text("Fine.")])
    run_tool_loop(conversation=demo_conversation, content="Hi", provider=provider)
    assert not ContextSummary.objects.exists()
    assert ModelCall.objects.get().context_summary is None


def test_the_admin_lists_summaries_read_only(
    admin_client, demo_conversation, windowed, summarizing
):
    fill(demo_conversation, turns=6)
    run_tool_loop(
        conversation=demo_conversation,
        content="One?",
        provider=ScriptedProvider([scripted_text("First.")]),
    )
    summary = ContextSummary.objects.get()
    listing = admin_client.get("/admin/conversations/contextsummary/")
    assert listing.status_code == 200 and str(summary.last_position) in listing.content.decode()
    page = admin_client.get(f"/admin/conversations/contextsummary/{summary.pk}/change/")
    assert page.status_code == 200 and summary.content[:40] in page.content.decode()
    assert admin_client.get("/admin/conversations/contextsummary/add/").status_code == 403


def test_the_admin_transcript_marks_where_each_calls_view_began(
    admin_client, demo_conversation, windowed, summarizing
):
    fill(demo_conversation, turns=6)
    run_tool_loop(
        conversation=demo_conversation,
        content="One?",
        provider=ScriptedProvider([scripted_text("First.")]),
    )
    call = ModelCall.objects.get(profile=windowed)
    summary = call.context_summary
    page = admin_client.get(f"/admin/conversations/conversation/{demo_conversation.pk}/change/")
    html = page.content.decode()
    marker = (
        f"the model saw a summary of #0 to #{summary.last_position}, then #{call.first_position} on"
    )
    assert html.count('class="llm-view"') == 1 and marker in html
    # The run's trace shows the same marker.
    trace = admin_client.get(f"/admin/conversations/run/{call.run_id}/change/").content.decode()
    assert marker in trace


def test_a_truncated_view_is_marked_as_not_sent(admin_client, demo_conversation, windowed):
    fill(demo_conversation, turns=6)
    run_tool_loop(
        conversation=demo_conversation,
        content="One?",
        provider=ScriptedProvider([scripted_text("First.")]),
    )
    call = ModelCall.objects.get()
    html = admin_client.get(
        f"/admin/conversations/conversation/{demo_conversation.pk}/change/"
    ).content.decode()
    assert f"the model saw #{call.first_position} on: earlier messages were not sent" in html


def test_a_newest_turn_that_leaves_no_room_for_a_summary_is_sent_without_one(
    demo_conversation, windowed, summarizing
):
    fill(demo_conversation, turns=3)
    # About 1,300 tokens: it fits the budget alone, not beside a summary's quarter of it.
    provider = ScriptedProvider([scripted_text("Read it.")])
    run = run_tool_loop(conversation=demo_conversation, content="y" * 5200, provider=provider)
    assert run.status == Run.Status.COMPLETED, run.error_message
    assert not ContextSummary.objects.exists()
    (request,) = provider.requests
    assert request.messages[0].content == windowed.system_prompt
    assert request.messages[-1].content == "y" * 5200 and len(request.messages) == 2


# The summary call is checked against the budgets and recorded like the loop's other calls.


def used_up(**scope) -> Budget:
    """A blocking total budget whose counter has reached its 100-token limit."""
    budget = Budget.objects.create(name="used up", period="total", token_limit=100, **scope)
    start, _end = period_bounds(period="total", at=timezone.now())
    BudgetCounter.objects.create(budget=budget, period_start=start, tokens=100, calls=1)
    return budget


@pytest.mark.parametrize("strategy", ["truncate", "summarize"])
def test_a_used_up_budget_refuses_the_summary_call_as_it_refuses_any_call(
    demo_conversation, windowed, user, strategy
):
    windowed.context_strategy = strategy  # summarize: the profile writes its own summaries
    windowed.save()
    fill(demo_conversation, turns=6)
    before = stored(demo_conversation)
    used_up(scope="user", user=user)
    provider = ScriptedProvider([scripted_text("Summary."), scripted_text("Answer.")])
    run = run_tool_loop(conversation=demo_conversation, content="One?", provider=provider)
    assert (run.status, run.error_code) == (Run.Status.BUDGET_EXHAUSTED, "budget_exceeded")
    assert '"used up"' in run.error_message
    assert provider.requests == []  # neither the summary nor the answer was asked for
    assert not ContextSummary.objects.exists() and not ModelCall.objects.exists()
    after = stored(demo_conversation)
    assert after[: len(before)] == before
    assert [row[1:3] for row in after[len(before) :]] == [("user", "One?")]
    counter = BudgetCounter.objects.get()
    assert (counter.tokens, counter.calls) == (100, 1)  # nothing reserved by a refused call


def test_a_used_up_budget_of_the_summary_profile_ends_the_run_before_its_call(
    demo_conversation, windowed, summarizing
):
    fill(demo_conversation, turns=6)
    used_up(scope="profile", profile=summarizing)
    provider = ScriptedProvider([scripted_text("Answer.")])
    run = run_tool_loop(conversation=demo_conversation, content="One?", provider=provider)
    assert (run.status, run.error_code) == (Run.Status.BUDGET_EXHAUSTED, "budget_exceeded")
    assert provider.requests == []
    assert not ContextSummary.objects.exists() and not ModelCall.objects.exists()


def test_the_summary_call_is_charged_to_the_budgets_covering_its_profile_and_owner(
    demo_conversation, windowed, summarizing, user
):
    scopes = {
        "owner": {"scope": "user", "user": user},
        "summaries": {"scope": "profile", "profile": summarizing},
        "demo": {"scope": "profile", "profile": windowed},
    }
    for name, scope in scopes.items():
        Budget.objects.create(name=name, period="month", token_limit=10**6, **scope)
    fill(demo_conversation, turns=6)
    provider = ScriptedProvider([scripted_text("First.", usage=Usage(700, 5))])
    run = run_tool_loop(conversation=demo_conversation, content="One?", provider=provider)
    assert run.status == Run.Status.COMPLETED, run.error_message
    made = ContextSummary.objects.get().model_call
    answer = ModelCall.objects.get(profile=windowed)
    assert made.cost is not None and made.cost > 0 and answer.cost is None  # demo: unpriced
    spent = made.prompt_tokens + made.completion_tokens
    counters = {
        counter.budget.name: (counter.tokens, counter.cost, counter.calls)
        for counter in BudgetCounter.objects.select_related("budget")
    }
    # What each call used, its reservation settled: the summary counts where it was checked.
    assert counters == {
        "owner": (spent + 705, made.cost, 2),
        "summaries": (spent, made.cost, 1),
        "demo": (705, 0, 1),
    }
    assert run.cost == made.cost


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ProviderConnectionError("no route"), "provider_unavailable"),
        (RuntimeError(), "internal_error"),
    ],
)
def test_a_failing_summary_call_is_recorded_as_failed_and_ends_the_run(
    demo_conversation, windowed, user, error, code
):
    windowed.context_strategy = "summarize"
    windowed.save()
    Budget.objects.create(name="owner", scope="user", user=user, period="day", token_limit=10**6)
    fill(demo_conversation, turns=6)
    provider = ScriptedProvider([error])
    if isinstance(error, ProviderError):
        run = run_tool_loop(conversation=demo_conversation, content="One?", provider=provider)
    else:  # as for the loop's own calls: the run is failed, the error not swallowed
        with pytest.raises(RuntimeError):
            run_tool_loop(conversation=demo_conversation, content="One?", provider=provider)
        run = Run.objects.get()
    assert (run.status, run.error_code) == (Run.Status.FAILED, code)
    (request,) = provider.requests
    assert request.messages[0].content == summaries.SUMMARY_INSTRUCTION
    (call,) = ModelCall.objects.all()
    assert (call.run, call.profile, call.status, call.error_code) == (run, windowed, "error", code)
    assert not ContextSummary.objects.exists()
    counter = BudgetCounter.objects.get()
    assert (counter.tokens, counter.calls) == (0, 1)  # its reservation given back


def test_a_summary_profile_refused_over_http_is_recorded_under_that_profile(
    demo_conversation, windowed, summarizing, monkeypatch
):
    monkeypatch.setenv("SUMMARY_TEST_KEY", "sk-summary")
    summarizing.language_model.provider = Provider.objects.create(
        slug="oai",
        name="OAI",
        adapter=Provider.Adapter.OPENAI,
        api_key_ref="env:SUMMARY_TEST_KEY",
        max_retries=0,
    )
    summarizing.language_model.save()
    recorder = Recorder(httpx.Response(400, json={"error": {"message": "no"}}), strict=True)
    built = summaries.build_provider
    # The summary profile's adapter is built inside the loop: it gets the recorder's client.
    monkeypatch.setattr(
        summaries, "build_provider", lambda profile: built(profile, http_client=recorder.client)
    )
    Budget.objects.create(
        name="summaries", scope="profile", profile=summarizing, period="day", token_limit=10**6
    )
    fill(demo_conversation, turns=6)
    provider = ScriptedProvider([scripted_text("Answer.")])
    run = run_tool_loop(conversation=demo_conversation, content="One?", provider=provider)
    assert (run.status, run.error_code) == (Run.Status.FAILED, "provider_http_error")
    assert len(recorder.requests) == 1 and provider.requests == []
    (call,) = ModelCall.objects.all()
    assert (call.profile, call.model, call.status) == (summarizing, "summary-model", "error")
    assert call.error_code == "provider_http_error"
    assert call.input_price_per_million == Decimal("1")  # the summary model's prices
    assert not ContextSummary.objects.exists()
    counter = BudgetCounter.objects.get()
    assert (counter.tokens, counter.calls) == (0, 1)
