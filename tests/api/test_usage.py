"""Costs in the API, ``GET /usage/`` and budgets refusing a posted message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from conversations.domain import Usage
from conversations.models import Budget, LanguageModel, ModelCall, Profile, Run
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import run_tool_loop
from conversations.services.usage.budgets import period_bounds

from .conftest import scripted_turn

pytestmark = pytest.mark.django_db

USAGE_URL = "/api/usage/"
ROW_FIELDS = [
    "key",
    "calls",
    "failed_calls",
    "unpriced_calls",
    "estimated_calls",
    "prompt_tokens",
    "cached_prompt_tokens",
    "cache_hit_rate",
    "completion_tokens",
    "reasoning_tokens",
    "total_tokens",
    "cost",
]
"""What one row of totals holds, in the documented order."""


@pytest.fixture
def priced(language_model):
    language_model.input_price_per_million = Decimal("1")
    language_model.output_price_per_million = Decimal("2")
    language_model.save()
    return language_model


def messages_url(conversation):
    return reverse("conversations:conversation-messages", args=[conversation.pk])


def test_runs_and_messages_show_their_cost(api, demo_conversation, priced):
    run = scripted_turn(demo_conversation)
    # Round one: 20 in, 5 out = 20 * 1 + 5 * 2 = 30 per million; round two: 40 + 24 = 64.
    body = api.get(reverse("conversations:run-detail", args=[run.pk])).json()
    assert body["cost"] == "0.000094000"
    assert body["unpriced_calls"] == 0
    assert body["currency"] == "USD"
    messages = api.get(messages_url(demo_conversation)).json()["results"]
    costs = [(m["role"], m["cost"]) for m in messages]
    assert costs == [
        ("user", None),
        ("assistant", "0.000030000"),
        ("tool", None),
        ("tool", None),
        ("assistant", "0.000064000"),
    ]


def test_unpriced_runs_say_so_instead_of_costing_zero(api, demo_conversation):
    run = scripted_turn(demo_conversation)
    body = api.get(reverse("conversations:run-detail", args=[run.pk])).json()
    assert body["cost"] is None
    assert body["unpriced_calls"] == 2


def test_the_currency_is_a_setting(api, demo_conversation, priced, settings):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "CURRENCY": "EUR"}
    run = scripted_turn(demo_conversation)
    assert ModelCall.objects.filter(run=run, currency="EUR").count() == 2
    assert api.get(USAGE_URL).json()["currency"] == "EUR"


# GET /usage/ ----------------------------------------------------------------------------------


@pytest.fixture
def ledger(user, other_user, demo_conversation, other_users_conversation, priced, provider):
    """Calls on three days, two models and two profiles for ``user``; one call of someone else."""
    scripted_turn(demo_conversation)  # two calls on the demo profile / demo-model
    premium = LanguageModel.objects.create(provider=provider, model_id="big-model")
    big = Profile.objects.create(slug="big", name="Big", language_model=premium)
    demo_conversation.profile = big
    demo_conversation.save()
    scripted_turn(demo_conversation)  # two unpriced calls on big / big-model
    scripted_turn(other_users_conversation)
    calls = list(ModelCall.objects.filter(user=user).order_by("started_at", "pk"))
    days = [datetime(2026, 11, 1, 9, tzinfo=UTC), datetime(2026, 11, 1, 23, tzinfo=UTC)]
    days += [datetime(2026, 11, 2, 1, tzinfo=UTC), datetime(2026, 11, 5, 12, tzinfo=UTC)]
    for call, day in zip(calls, days, strict=True):
        ModelCall.objects.filter(pk=call.pk).update(started_at=day)
    ModelCall.objects.filter(user=other_user).update(started_at=datetime(2026, 11, 1, tzinfo=UTC))
    return calls


def test_usage_groups_by_day_between_from_and_to(api, ledger):
    response = api.get(USAGE_URL, {"from": "2026-11-01", "to": "2026-11-30"})
    assert response.status_code == 200
    body = response.json()
    assert body["group_by"] == "day" and body["from"] == "2026-11-01" and body["to"] == "2026-11-30"
    assert [(g["key"], g["calls"]) for g in body["groups"]] == [
        ("2026-11-01", 2),
        ("2026-11-02", 1),
        ("2026-11-05", 1),
    ]
    total = body["total"]
    assert total["calls"] == 4 and total["unpriced_calls"] == 2
    assert total["prompt_tokens"] == 120 and total["completion_tokens"] == 34
    assert total["total_tokens"] == 154 and total["cached_prompt_tokens"] == 8
    assert total["cache_hit_rate"] == pytest.approx(8 / 120)
    assert total["cost"] == "0.000094000"  # only the priced calls
    assert all(list(row) == ROW_FIELDS for row in [total, *body["groups"]])
    assert body["user"] == str(ledger[0].user_id)


def test_usage_groups_by_model_and_profile(api, ledger):
    by_model = api.get(USAGE_URL, {"from": "2026-11-01", "group_by": "model"}).json()
    rows = {g["key"]: (g["calls"], g["cost"], g["unpriced_calls"]) for g in by_model["groups"]}
    assert rows == {"demo-model": (2, "0.000094000", 0), "big-model": (2, None, 2)}
    by_profile = api.get(USAGE_URL, {"from": "2026-11-01", "group_by": "profile"}).json()
    assert {g["key"]: g["calls"] for g in by_profile["groups"]} == {"demo": 2, "big": 2}


def test_usage_date_filters_are_inclusive_utc_days(api, ledger):
    body = api.get(USAGE_URL, {"from": "2026-11-02", "to": "2026-11-02"}).json()
    assert body["total"]["calls"] == 1
    body = api.get(USAGE_URL, {"from": "2026-11-03", "to": "2026-11-04"}).json()
    assert body["total"]["calls"] == 0 and body["total"]["cost"] is None and body["groups"] == []


def test_usage_defaults_to_the_last_thirty_days(api, demo_conversation):
    scripted_turn(demo_conversation)
    body = api.get(USAGE_URL).json()
    today = datetime.now(UTC).date()
    assert body["to"] == today.isoformat()
    assert body["from"] == (today - timedelta(days=29)).isoformat()
    assert body["total"]["calls"] == 2


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"group_by": "week"}, "group_by"),
        ({"from": "yesterday"}, "from"),
        ({"from": "2026-11-05", "to": "2026-11-01"}, "from"),
    ],
)
def test_usage_rejects_bad_parameters(api, params, parameter):
    response = api.get(USAGE_URL, params)
    assert response.status_code == 400
    assert [e["parameter"] for e in response.json()["errors"]] == [parameter]


def test_others_usage_needs_the_permission(api, user, other_user, ledger):
    for asked in ("all", str(other_user.pk)):
        response = api.get(USAGE_URL, {"user": asked})
        assert response.status_code == 403
        assert response.json()["code"] == "permission_denied"
    # Asking for yourself explicitly is fine.
    assert api.get(USAGE_URL, {"user": str(user.pk)}).status_code == 200


def test_with_the_permission_any_user_or_all(api, user, other_user, ledger):
    user.user_permissions.add(Permission.objects.get(codename="view_all_usage"))
    window = {"from": "2026-11-01", "to": "2026-11-30"}
    theirs = api.get(USAGE_URL, {**window, "user": str(other_user.pk)}).json()
    assert theirs["user"] == str(other_user.pk) and theirs["total"]["calls"] == 2
    everyone = api.get(USAGE_URL, {**window, "user": "all"}).json()
    assert everyone["user"] == "all" and everyone["total"]["calls"] == 6
    unknown = api.get(USAGE_URL, {"user": "999999"})
    assert unknown.status_code == 400 and unknown.json()["errors"][0]["parameter"] == "user"


def test_usage_needs_authentication(anonymous):
    assert anonymous.get(USAGE_URL).status_code in (401, 403)


# Budgets refusing a posted message ------------------------------------------------------------


def test_posting_while_a_budget_is_used_up_is_429_with_retry_after(api, demo_conversation, user):
    Budget.objects.create(name="daily", scope="user", user=user, period="day", token_limit=1)
    first = api.post(messages_url(demo_conversation), {"content": "hi"}, format="json")
    assert first.status_code == 201
    asked = datetime.now(UTC)
    refused = api.post(messages_url(demo_conversation), {"content": "again"}, format="json")
    assert refused.status_code == 429
    body = refused.json()
    assert body["code"] == "budget_exceeded" and '"daily"' in body["detail"]
    _start, end = period_bounds(period="day", at=asked)
    wait = int(refused["Retry-After"])
    # At most the time left in the period when the request was made (rounded up).
    assert 0 < wait <= (end - asked).total_seconds() + 1
    assert Run.objects.filter(conversation=demo_conversation).count() == 1


def test_a_total_budget_has_no_retry_after(api, demo_conversation):
    Budget.objects.create(name="pilot", scope="global", period="total", token_limit=1)
    api.post(messages_url(demo_conversation), {"content": "hi"}, format="json")
    refused = api.post(messages_url(demo_conversation), {"content": "again"}, format="json")
    assert refused.status_code == 429
    assert "Retry-After" not in refused


def test_a_warn_budget_never_refuses(api, demo_conversation, user):
    Budget.objects.create(
        name="fyi", scope="user", user=user, period="day", token_limit=1, action="warn"
    )
    for content in ("hi", "again"):
        response = api.post(messages_url(demo_conversation), {"content": content}, format="json")
        assert response.status_code == 201


def test_estimated_tokens_are_marked_on_the_message_the_run_and_the_report(api, demo_conversation):
    # A provider that could only guess its usage (as the loop does for a stopped stream).
    guessed = Usage(prompt_tokens=12, completion_tokens=3, estimated=True)
    provider = ScriptedProvider([scripted_text("Cut short", usage=guessed)])
    run = run_tool_loop(conversation=demo_conversation, content="Go", provider=provider)

    body = api.get(reverse("conversations:run-detail", args=[run.pk])).json()
    assert body["usage"]["estimated"] is True and body["usage"]["total_tokens"] == 15
    assistant = api.get(messages_url(demo_conversation)).json()["results"][-1]
    assert assistant["usage"]["estimated"] is True and assistant["usage"]["total_tokens"] == 15
    report = api.get(USAGE_URL).json()
    assert report["total"]["estimated_calls"] == 1 and report["total"]["total_tokens"] == 15
    assert ModelCall.objects.get(run=run).estimated


def test_usage_the_provider_reported_is_not_marked_estimated(api, demo_conversation):
    run = scripted_turn(demo_conversation)
    body = api.get(reverse("conversations:run-detail", args=[run.pk])).json()
    assert body["usage"]["estimated"] is False
    assert api.get(USAGE_URL).json()["total"]["estimated_calls"] == 0
