"""Budgets: checked before every model call, charged with every recorded one."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction

from conversations import signals
from conversations.domain import ToolCall, Usage
from conversations.domain.estimates import estimate_call
from conversations.exceptions import BudgetExceeded
from conversations.models import Budget, BudgetCounter, Conversation, ModelCall, Run
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import run_tool_loop
from conversations.services.usage.budgets import check_budgets, period_bounds
from conversations.tools import registry, tool

from .test_concurrency import run_in_threads

TEN = Usage(prompt_tokens=6, completion_tokens=4)


def text(content="ok"):
    return scripted_text(content, usage=TEN)


@pytest.fixture
def adder():
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        yield r


def add_call(call_id="c1"):
    return scripted_calls(ToolCall(id=call_id, name="add", arguments={"a": 1, "b": 2}), usage=TEN)


@pytest.mark.parametrize(
    ("period", "start", "end"),
    [
        ("day", datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)),
        ("week", datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 7, tzinfo=UTC)),
        ("month", datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)),
        ("total", datetime(2000, 1, 1, tzinfo=UTC), None),
    ],
)
def test_periods_are_calendar_periods_in_utc(period, start, end):
    # 2026-11-30 is a Monday.
    at = datetime(2026, 11, 30, 17, 5, tzinfo=UTC)
    assert period_bounds(period=period, at=at) == (start, end)


def test_december_rolls_over_to_january():
    at = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert period_bounds(period="month", at=at)[1] == datetime(2027, 1, 1, tzinfo=UTC)


@pytest.mark.django_db
def test_a_user_budget_blocks_the_second_run(demo_conversation, user, other_user):
    Budget.objects.create(name="alice daily", scope="user", user=user, period="day", token_limit=10)
    first = run_tool_loop(
        conversation=demo_conversation, content="hi", provider=ScriptedProvider([text()])
    )
    assert first.status == Run.Status.COMPLETED
    provider = ScriptedProvider([text()])
    second = run_tool_loop(conversation=demo_conversation, content="again", provider=provider)
    assert second.status == Run.Status.BUDGET_EXHAUSTED
    assert second.error_code == "budget_exceeded"
    assert '"alice daily"' in second.error_message
    _start, end = period_bounds(period="day", at=second.started_at)
    assert end.isoformat() in second.error_message
    assert provider.requests == []  # the call never started
    assert ModelCall.objects.filter(run=second).count() == 0
    # Another user is not covered.
    theirs = Conversation.objects.create(owner=other_user, profile=demo_conversation.profile)
    other = run_tool_loop(conversation=theirs, content="hi", provider=ScriptedProvider([text()]))
    assert other.status == Run.Status.COMPLETED


@pytest.mark.django_db
def test_a_budget_is_checked_before_every_call_and_open_calls_are_answered(
    demo_conversation, profile, adder
):
    Budget.objects.create(
        name="demo profile", scope="profile", profile=profile, period="month", token_limit=10
    )
    provider = ScriptedProvider([add_call(), text()])
    run = run_tool_loop(conversation=demo_conversation, content="1+2?", provider=provider)
    assert run.status == Run.Status.BUDGET_EXHAUSTED
    assert len(provider.requests) == 1
    history = get_history(conversation=demo_conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    from tests.providers.replay import assert_every_adapter_accepts

    assert_every_adapter_accepts(history)
    counter = BudgetCounter.objects.get(budget__name="demo profile")
    assert (counter.tokens, counter.calls) == (10, 1)


@pytest.mark.django_db
def test_a_profile_budget_leaves_other_profiles_alone(demo_conversation, profile, user):
    from conversations.models import Profile

    other = Profile.objects.create(
        slug="other", name="Other", language_model=profile.language_model
    )
    Budget.objects.create(name="other", scope="profile", profile=other, period="day", token_limit=1)
    run = run_tool_loop(
        conversation=demo_conversation, content="hi", provider=ScriptedProvider([text()])
    )
    assert run.status == Run.Status.COMPLETED
    theirs = Conversation.objects.create(owner=user, profile=other)
    run_tool_loop(conversation=theirs, content="hi", provider=ScriptedProvider([text()]))
    blocked = run_tool_loop(conversation=theirs, content="hi", provider=ScriptedProvider([text()]))
    assert blocked.status == Run.Status.BUDGET_EXHAUSTED


@pytest.mark.django_db
def test_a_total_cost_budget_never_resets(demo_conversation, language_model, user):
    language_model.input_price_per_million = Decimal("500000")
    language_model.output_price_per_million = Decimal("500000")
    language_model.save()
    Budget.objects.create(name="pilot", scope="global", period="total", cost_limit=Decimal("5"))
    run_tool_loop(conversation=demo_conversation, content="hi", provider=ScriptedProvider([text()]))
    with pytest.raises(BudgetExceeded) as excinfo:
        check_budgets(user_id=user.pk, profile_id=demo_conversation.profile_id)
    assert excinfo.value.resets_at is None
    assert excinfo.value.budget == "pilot"
    assert "for good" in excinfo.value.detail
    blocked = run_tool_loop(
        conversation=demo_conversation, content="hi", provider=ScriptedProvider([text()])
    )
    assert blocked.status == Run.Status.BUDGET_EXHAUSTED
    assert BudgetCounter.objects.get().cost == Decimal("5")


@pytest.mark.django_db
def test_a_warn_budget_signals_once_per_period_and_never_blocks(
    demo_conversation, user, django_capture_on_commit_callbacks
):
    Budget.objects.create(
        name="heads-up", scope="user", user=user, period="week", token_limit=15, action="warn"
    )
    warnings = []

    def receiver(sender, budget, run, period_start, **kwargs):
        warnings.append((budget.name, run.pk, period_start))

    signals.budget_warning.connect(receiver)
    try:
        runs = []
        for _ in range(3):
            with django_capture_on_commit_callbacks(execute=True):
                runs.append(
                    run_tool_loop(
                        conversation=demo_conversation,
                        content="hi",
                        provider=ScriptedProvider([text()]),
                    )
                )
    finally:
        signals.budget_warning.disconnect(receiver)
    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 3
    start, _end = period_bounds(period="week", at=runs[1].started_at)
    assert warnings == [("heads-up", runs[1].pk, start)]
    assert BudgetCounter.objects.get().tokens == 30


@pytest.mark.django_db
def test_a_budget_deleted_during_a_model_call_is_not_charged_and_the_run_goes_on(
    demo_conversation, user
):
    kept = Budget.objects.create(name="kept", scope="user", user=user, period="day", token_limit=99)
    gone = Budget.objects.create(name="gone", scope="global", period="day", token_limit=99)

    def answer(messages, tools, options):
        # An admin deletes a budget the call was checked against, while it runs.
        Budget.objects.filter(pk=gone.pk).delete()
        return scripted_text("ok", usage=Usage(prompt_tokens=3, completion_tokens=2))

    run = run_tool_loop(
        conversation=demo_conversation, content="hi", provider=ScriptedProvider([answer])
    )
    assert run.status == Run.Status.COMPLETED
    (counter,) = BudgetCounter.objects.all()
    assert (counter.budget_id, counter.tokens, counter.calls) == (kept.pk, 5, 1)
    assert ModelCall.objects.get(run=run).prompt_tokens == 3


@pytest.mark.django_db
def test_inactive_budgets_do_not_count(demo_conversation, user):
    Budget.objects.create(
        name="off", scope="user", user=user, period="day", token_limit=1, is_active=False
    )
    for _ in range(2):
        run = run_tool_loop(
            conversation=demo_conversation, content="hi", provider=ScriptedProvider([text()])
        )
        assert run.status == Run.Status.COMPLETED


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"scope": "user", "period": "day", "token_limit": 1}, "scope_target"),
        ({"scope": "global", "period": "day"}, "has_limit"),
        ({"scope": "global", "period": "year", "token_limit": 1}, "period_valid"),
        ({"scope": "global", "period": "day", "token_limit": 1, "action": "x"}, "action_valid"),
        ({"scope": "global", "period": "day", "cost_limit": Decimal(-1)}, "non_negative"),
    ],
)
def test_the_database_refuses_malformed_budgets(fields, rule):
    with pytest.raises(IntegrityError, match=rule), transaction.atomic():
        Budget.objects.create(name="bad", **fields)


# Concurrency (PostgreSQL: real row locks) ---------------------------------------------------

RUNS = 10
LIMIT = 150  # tokens: fifteen calls of ten, of the fifty the runs would make


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_never_start_a_call_after_the_limit_was_reached(
    django_user_model, profile, adder, settings
):
    settings.CONVERSATIONS = {"MAX_RUNS_PER_USER": RUNS}  # the budget is the bound under test
    owner = django_user_model.objects.create(username="alice")
    Budget.objects.create(name="few", scope="global", period="day", token_limit=LIMIT)
    conversations = [Conversation.objects.create(owner=owner, profile=profile) for _ in range(RUNS)]
    barrier = threading.Barrier(RUNS)
    errors: list[BaseException] = []

    def body(n):
        try:
            rounds = [add_call(f"c{n}-{i}") for i in range(profile.max_iterations)]
            provider = ScriptedProvider([*rounds, text()])
            barrier.wait()
            run_tool_loop(conversation=conversations[n], content="go", provider=provider)
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(n,)) for n in range(RUNS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors

    calls = list(ModelCall.objects.order_by("recorded_at"))
    for call in calls:
        # What was recorded before this call was allowed to start stayed under the limit.
        seen = sum(
            c.prompt_tokens + c.completion_tokens for c in calls if c.recorded_at < call.started_at
        )
        assert seen < LIMIT
    assert BudgetCounter.objects.get().tokens == sum(
        c.prompt_tokens + c.completion_tokens for c in calls
    )
    runs = list(Run.objects.all())
    assert Run.Status.BUDGET_EXHAUSTED in {run.status for run in runs}
    assert all(run.status != Run.Status.RUNNING for run in runs)
    from tests.providers.replay import assert_every_adapter_accepts

    for conversation in conversations:
        assert_every_adapter_accepts(get_history(conversation=conversation))


@pytest.mark.django_db
def test_the_queries_of_a_run_do_not_grow_with_the_number_of_budgets(demo_conversation, user):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries_of_one_run():
        with CaptureQueriesContext(connection) as captured:
            run = run_tool_loop(
                conversation=demo_conversation, content="hi", provider=ScriptedProvider([text()])
            )
        assert run.status == Run.Status.COMPLETED
        return len(captured)

    # Total budgets: a period that never ends, so no counter is created between two runs.
    Budget.objects.create(name="b0", scope="user", user=user, period="total", token_limit=10**9)
    queries_of_one_run()  # the counters exist from now on
    one = queries_of_one_run()
    for n in range(1, 5):
        Budget.objects.create(
            name=f"b{n}", scope="global", period="total", cost_limit=Decimal(10**6)
        )
    queries_of_one_run()
    assert queries_of_one_run() == one


# Reserving a call's estimate -------------------------------------------------------------


@pytest.mark.django_db
def test_a_refused_call_reserves_nothing_and_a_recorded_one_keeps_only_what_it_used(
    demo_conversation, user
):
    Budget.objects.create(name="alice", scope="user", user=user, period="day", token_limit=10)
    run_tool_loop(conversation=demo_conversation, content="hi", provider=ScriptedProvider([text()]))
    blocked = run_tool_loop(
        conversation=demo_conversation, content="again", provider=ScriptedProvider([text()])
    )
    assert blocked.status == Run.Status.BUDGET_EXHAUSTED
    counter = BudgetCounter.objects.get()
    assert (counter.tokens, counter.calls) == (10, 1)  # the estimate of neither call is left


@pytest.mark.django_db
def test_a_failed_call_gives_back_its_reservation(demo_conversation, user):
    from conversations.exceptions import ProviderConnectionError

    Budget.objects.create(name="alice", scope="user", user=user, period="day", token_limit=10**6)
    provider = ScriptedProvider([ProviderConnectionError("down")])
    run = run_tool_loop(conversation=demo_conversation, content="hi", provider=provider)
    assert run.status == Run.Status.FAILED
    counter = BudgetCounter.objects.get()
    assert (counter.tokens, counter.cost, counter.calls) == (0, Decimal(0), 1)


@pytest.mark.django_db
def test_a_call_in_flight_counts_as_its_estimate(demo_conversation, user, profile):
    profile.max_tokens = 300
    profile.save()
    Budget.objects.create(name="alice", scope="user", user=user, period="day", token_limit=10**6)
    seen = []

    def answer(messages, tools, options):
        # Another process reading the budget now sees this call as spent.
        seen.append(BudgetCounter.objects.get().tokens)
        expected = estimate_call(sent=messages, tools=tools, max_output_tokens=options.max_tokens)
        seen.append(expected.prompt_tokens + expected.completion_tokens)
        return text()

    run = run_tool_loop(
        conversation=demo_conversation, content="hi", provider=ScriptedProvider([answer])
    )
    assert run.status == Run.Status.COMPLETED
    reserved, estimate = seen
    assert reserved == estimate > 300
    assert BudgetCounter.objects.get().tokens == 10


@pytest.mark.django_db
def test_a_counter_reset_by_hand_while_a_call_runs_never_goes_below_zero(demo_conversation, user):
    Budget.objects.create(name="alice", scope="user", user=user, period="day", token_limit=10**6)

    def answer(messages, tools, options):
        # An admin resets the counter, reservation and all, while the call runs.
        BudgetCounter.objects.update(tokens=0, cost=Decimal(0))
        return text()

    run = run_tool_loop(
        conversation=demo_conversation, content="hi", provider=ScriptedProvider([answer])
    )
    assert run.status == Run.Status.COMPLETED
    counter = BudgetCounter.objects.get()
    assert (counter.tokens, counter.cost, counter.calls) == (0, Decimal(0), 1)


POSTS = 20
BLOCKING_LIMIT = 5_000
USED = Usage(prompt_tokens=10, completion_tokens=740)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_overspend_a_budget_by_at_most_one_calls_estimate(
    django_user_model, profile, settings
):
    # One user's posts, all running at once: the per-user cap of running runs must not be the bound.
    settings.CONVERSATIONS = {"MAX_RUNS_PER_USER": POSTS}
    profile.max_tokens = 1000
    profile.save()
    owner = django_user_model.objects.create(username="alice")
    Budget.objects.create(name="shared", scope="global", period="day", token_limit=BLOCKING_LIMIT)
    conversations = [
        Conversation.objects.create(owner=owner, profile=profile) for _ in range(POSTS)
    ]
    decided = threading.Condition()
    outcomes: list[bool] = []  # one per post: whether its model call was allowed
    estimates: list[int] = []

    def decide(called):
        with decided:
            outcomes.append(called)
            decided.notify_all()

    def answer(messages, tools, options):
        estimate = estimate_call(sent=messages, tools=tools, max_output_tokens=options.max_tokens)
        estimates.append(estimate.prompt_tokens + estimate.completion_tokens)
        decide(True)
        # Waiting holds no pooled connection (twenty would exhaust the pool).
        connection.close()
        # Every allowed call is still in flight when the last post is allowed or refused.
        with decided:
            assert decided.wait_for(lambda: len(outcomes) == POSTS, timeout=60)
        return scripted_text("ok", usage=USED)

    def post(n):
        provider = ScriptedProvider([answer])
        try:
            run_tool_loop(conversation=conversations[n], content="go", provider=provider)
        finally:
            if not provider.requests:
                decide(False)

    run_in_threads(post, POSTS)

    spent = sum(c.prompt_tokens + c.completion_tokens for c in ModelCall.objects.all())
    assert spent <= BLOCKING_LIMIT + max(estimates)
    assert BudgetCounter.objects.get().tokens == spent  # every reservation was settled
    statuses = [run.status for run in Run.objects.all()]
    assert statuses.count(Run.Status.COMPLETED) == outcomes.count(True) == len(estimates)
    assert statuses.count(Run.Status.BUDGET_EXHAUSTED) == POSTS - len(estimates)
