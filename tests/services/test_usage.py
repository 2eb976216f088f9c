"""The usage ledger: one priced ModelCall per provider request, failures included."""

from __future__ import annotations

from decimal import Decimal

import pytest

from conversations.domain import Usage
from conversations.exceptions import ProviderTimeout
from conversations.models import ModelCall, Run
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop
from conversations.services.usage.ledger import Prices, call_cost
from conversations.tools import registry, tool

D = Decimal


# Arithmetic (no database) ---------------------------------------------------------------------


def test_plain_tokens_are_charged_at_input_and_output_prices():
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=500_000)
    assert call_cost(usage=usage, prices=Prices(input=D("2"), output=D("8"))) == D("6")


def test_cached_and_reasoning_tokens_have_their_own_prices_and_are_not_counted_twice():
    usage = Usage(
        prompt_tokens=1000, completion_tokens=400, cached_prompt_tokens=600, reasoning_tokens=300
    )
    prices = Prices(input=D("3"), cached_input=D("0.3"), output=D("15"), reasoning=D("20"))
    # 400 uncached * 3 + 600 cached * 0.3 + 100 plain output * 15 + 300 reasoning * 20, per million
    expected = (400 * D("3") + 600 * D("0.3") + 100 * D("15") + 300 * D("20")) / 1_000_000
    assert call_cost(usage=usage, prices=prices) == expected
    assert expected == D("0.00888")


def test_cached_input_defaults_to_input_and_reasoning_to_output():
    usage = Usage(
        prompt_tokens=1000, completion_tokens=400, cached_prompt_tokens=600, reasoning_tokens=300
    )
    prices = Prices(input=D("3"), output=D("15"))
    assert call_cost(usage=usage, prices=prices) == (1000 * D(3) + 400 * D(15)) / 1_000_000


@pytest.mark.parametrize(
    ("prices", "usage"),
    [
        (Prices(output=D("1")), Usage(prompt_tokens=10, completion_tokens=1)),
        (Prices(input=D("1")), Usage(prompt_tokens=10, completion_tokens=1)),
        (Prices(), Usage(prompt_tokens=10)),
        # A cached price alone does not price the uncached part of the prompt.
        (
            Prices(cached_input=D("1"), output=D("1")),
            Usage(prompt_tokens=10, cached_prompt_tokens=5, completion_tokens=1),
        ),
    ],
)
def test_an_unknown_price_makes_the_cost_unknown_not_zero(prices, usage):
    assert call_cost(usage=usage, prices=prices) is None


def test_a_price_that_no_token_needs_may_stay_unknown():
    usage = Usage(prompt_tokens=10, completion_tokens=0)
    assert call_cost(usage=usage, prices=Prices(input=D("1"))) == D("0.00001")


# The ledger -----------------------------------------------------------------------------------


@pytest.fixture
def priced(language_model):
    language_model.input_price_per_million = D("2")
    language_model.cached_input_price_per_million = D("0.5")
    language_model.output_price_per_million = D("10")
    language_model.reasoning_price_per_million = D("12")
    language_model.save()
    return language_model


@pytest.fixture
def adder():
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        yield r


USAGE = Usage(
    prompt_tokens=1000, completion_tokens=200, cached_prompt_tokens=400, reasoning_tokens=50
)
# 600 * 2 + 400 * 0.5 + 150 * 10 + 50 * 12 = 3500 per million
USAGE_COST = D("0.0035")


@pytest.mark.django_db
def test_every_call_of_a_run_is_recorded_with_its_message_and_cost(
    demo_conversation, profile, priced, adder
):
    from conversations.domain import ToolCall

    provider = ScriptedProvider(
        [
            scripted_calls(ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2}), usage=USAGE),
            scripted_text("3", usage=USAGE, model="demo-model-2026"),
        ]
    )
    run = run_tool_loop(conversation=demo_conversation, content="1+2?", provider=provider)
    assert run.status == Run.Status.COMPLETED
    calls = list(ModelCall.objects.filter(run=run).order_by("started_at", "pk"))
    assert len(calls) == 2
    first, second = calls
    assert first.status == second.status == ModelCall.Status.OK
    assert first.message.tool_calls.get().call_id == "c1"
    assert second.message.content == "3"
    assert second.model == "demo-model"  # asked for; the message keeps who answered
    assert second.message.model == "demo-model-2026"
    assert first.user == demo_conversation.owner
    assert first.profile == profile
    assert first.conversation_id == demo_conversation.pk
    assert (first.prompt_tokens, first.cached_prompt_tokens) == (1000, 400)
    assert (first.completion_tokens, first.reasoning_tokens) == (200, 50)
    assert first.cost == second.cost == USAGE_COST
    assert first.currency == "USD"
    assert first.latency_ms is not None
    # The profile streams (its default), so the first piece's time is known too.
    assert first.time_to_first_token_ms is not None
    assert first.time_to_first_token_ms <= first.latency_ms
    run.refresh_from_db()
    assert run.cost == 2 * USAGE_COST
    assert run.unpriced_calls == 0


@pytest.mark.django_db
def test_a_price_change_applies_from_the_next_run_and_never_rewrites_a_cost(
    demo_conversation, priced, adder
):
    from conversations.domain import ToolCall

    def second_round(messages, tools, options):
        # The operator changes the price while the run is under way.
        priced.input_price_per_million = D("4")
        priced.save()
        return scripted_text("3", usage=Usage(prompt_tokens=1_000_000))

    provider = ScriptedProvider(
        [
            scripted_calls(
                ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2}),
                usage=Usage(prompt_tokens=1_000_000),
            ),
            second_round,
        ]
    )
    run = run_tool_loop(conversation=demo_conversation, content="1+2?", provider=provider)
    first, second = ModelCall.objects.filter(run=run).order_by("started_at", "pk")
    # Every call of a run is charged at the prices read when it started.
    assert (first.input_price_per_million, first.cost) == (D("2"), D("2"))
    assert (second.input_price_per_million, second.cost) == (D("2"), D("2"))
    provider = ScriptedProvider([scripted_text("4", usage=Usage(prompt_tokens=1_000_000))])
    later = run_tool_loop(conversation=demo_conversation, content="2+2?", provider=provider)
    (third,) = ModelCall.objects.filter(run=later)
    assert (third.input_price_per_million, third.cost) == (D("4"), D("4"))
    priced.input_price_per_million = D("100")
    priced.save()
    first.refresh_from_db()
    assert first.cost == D("2")
    run.refresh_from_db()
    later.refresh_from_db()
    assert (run.cost, later.cost) == (D("4"), D("4"))


@pytest.mark.django_db
def test_a_call_on_an_unpriced_model_has_no_cost_and_is_counted(demo_conversation):
    provider = ScriptedProvider([scripted_text("hi", usage=Usage(prompt_tokens=5))])
    run = run_tool_loop(conversation=demo_conversation, content="hi", provider=provider)
    call = ModelCall.objects.get(run=run)
    assert call.cost is None
    run.refresh_from_db()
    assert run.cost is None
    assert run.unpriced_calls == 1


@pytest.mark.django_db
def test_a_failed_provider_call_is_recorded_with_its_error_code(demo_conversation, priced):
    provider = ScriptedProvider([ProviderTimeout("openai: no answer within 60s")])
    run = run_tool_loop(conversation=demo_conversation, content="hi", provider=provider)
    assert run.status == Run.Status.FAILED
    call = ModelCall.objects.get(run=run)
    assert call.status == ModelCall.Status.ERROR
    assert call.error_code == "provider_timeout"
    assert call.message is None
    assert call.prompt_tokens == call.completion_tokens == 0
    assert call.cost == D("0")
    assert call.input_price_per_million == D("2")


@pytest.mark.django_db
def test_deleting_a_conversation_keeps_its_spending(demo_conversation, priced, user):
    from conversations.models import Budget, BudgetCounter
    from conversations.services import delete_conversation

    Budget.objects.create(name="cap", scope="user", user=user, period="total", token_limit=10**6)
    provider = ScriptedProvider([scripted_text("hi", usage=Usage(prompt_tokens=1_000_000))])
    run_tool_loop(conversation=demo_conversation, content="hi", provider=provider)
    delete_conversation(conversation=demo_conversation)
    call = ModelCall.objects.get()
    assert (call.run, call.conversation, call.message) == (None, None, None)
    assert (call.user, call.cost) == (user, D("2"))
    assert BudgetCounter.objects.get().tokens == 1_000_000
