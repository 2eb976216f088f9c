"""The usage page, the model-call ledger and the budgets in the admin."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from conversations.admin.charts import (
    CHART_HEIGHT,
    LABEL_SPACE,
    TOP_SPACE,
    daily_chart,
    format_value,
    nice_ceiling,
)
from conversations.domain import Usage
from conversations.models import Budget, Conversation, ModelCall
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import run_tool_loop

pytestmark = pytest.mark.django_db

USAGE_URL = "/admin/conversations/modelcall/usage/"


def test_bars_scale_to_a_round_top_labelled_on_the_value_axis():
    days = [date(2026, 11, 1) + timedelta(days=n) for n in range(3)]
    chart = daily_chart(list(zip(days, [0, 5, 8], strict=True)), unit=" tokens")
    plot = CHART_HEIGHT - LABEL_SPACE - TOP_SPACE
    assert [bar.height for bar in chart.bars] == [0, plot / 2, plot * 8 / 10]
    assert [(tick.label, tick.y) for tick in chart.ticks] == [
        ("0", chart.baseline),
        ("5", chart.baseline - plot / 2),
        ("10", chart.baseline - plot),
    ]
    assert chart.bars[1].title == "Mon 2026-11-02: 5 tokens"
    assert [bar.label for bar in chart.bars] == ["Nov 1", "", "Nov 3"]
    # Every day's column can be pointed at, the empty one too.
    assert all(bar.column_width > 0 for bar in chart.bars)
    assert daily_chart([]).bars == ()


@pytest.mark.parametrize(
    ("largest", "top"),
    [(0, 1), (0.7, 1), (1, 1), (1.2, 2), (2.1, 2.5), (3, 5), (7, 10), (12_345, 20_000)],
)
def test_the_axis_top_is_a_round_number_at_or_above_the_largest_day(largest, top):
    assert nice_ceiling(largest) == pytest.approx(top)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0"),
        (1500, "1,500"),
        (250_000, "250k"),
        (1_250_000, "1.25M"),
        (Decimal("0.0162000"), "0.0162"),
        (Decimal("0.00001"), "1.00e-05"),
        (2.5, "2.5"),
    ],
)
def test_values_are_written_short(value, shown):
    assert format_value(value) == shown


@pytest.fixture
def spent(admin_user, user, openai_profile, openai_model):
    openai_model.input_price_per_million = Decimal("10")
    openai_model.output_price_per_million = Decimal("30")
    openai_model.save()
    Budget.objects.create(
        name="assistant monthly",
        scope="profile",
        profile=openai_profile,
        period="month",
        token_limit=6200,
    )
    conversation = Conversation.objects.create(owner=user, profile=openai_profile)
    provider = ScriptedProvider(
        [scripted_text("ok", usage=Usage(1000, 100)), scripted_text("ok", usage=Usage(2000, 0))]
    )
    for content in ("one", "two"):
        run_tool_loop(conversation=conversation, content=content, provider=provider)
    # One of the two calls was made five days ago.
    first = ModelCall.objects.order_by("started_at", "pk").first()
    ModelCall.objects.filter(pk=first.pk).update(started_at=datetime.now(UTC) - timedelta(days=5))
    return conversation


def test_the_usage_page_draws_both_charts_and_the_tops(admin_client, spent, openai_profile, user):
    response = admin_client.get(USAGE_URL)
    assert response.status_code == 200
    html = response.content.decode()
    for chart in ("usage-cost-chart", "usage-token-chart"):
        svg = re.search(rf'<svg id="{chart}".*?</svg>', html, re.S).group(0)
        bars = r'<rect class="usage-bar" [^>]*height="([\d.]+)"'
        heights = [float(h) for h in re.findall(bars, svg)]
        assert len(heights) == 30
        assert sum(1 for h in heights if h > 0) == 2
        assert len(re.findall(r'<text class="usage-tick"', svg)) == 3  # the value axis
        assert len(re.findall(r"<title>", svg)) == 30  # a tooltip per day
    assert "0.0330 USD" in html  # (1000 * 10 + 100 * 30 + 2000 * 10) per million
    runs = reverse("admin:conversations_run_changelist")
    assert f'href="{runs}?q=gpt-test"' in html
    assert f'href="{runs}?profile__id__exact={openai_profile.pk}"' in html
    calls = reverse("admin:conversations_modelcall_changelist")
    assert f'href="{calls}?user__id__exact={user.pk}"' in html
    # Counters count when a call is recorded: 3100 tokens of 6200.
    assert 'value="50"></meter> 50%' in html
    assert "<script" not in html.split('id="usage-page"')[1]


def test_the_links_lead_to_lists_that_show_the_runs(admin_client, spent, openai_profile, user):
    runs = reverse("admin:conversations_run_changelist")
    for query in ("?q=gpt-test", f"?profile__id__exact={openai_profile.pk}"):
        response = admin_client.get(runs + query)
        assert response.status_code == 200
        assert response.context["cl"].result_count == 2
    calls = reverse("admin:conversations_modelcall_changelist")
    response = admin_client.get(f"{calls}?user__id__exact={user.pk}")
    assert response.status_code == 200 and response.context["cl"].result_count == 2
    assert b"Usage overview" in response.content


def test_the_usage_page_needs_staff(client, user):
    response = client.get(USAGE_URL)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_budgets_are_edited_with_their_database_rules(admin_client, user):
    add = reverse("admin:conversations_budget_add")
    response = admin_client.post(
        add,
        {"name": "nobody", "scope": "user", "period": "day", "token_limit": "5", "action": "block"},
    )
    assert response.status_code == 200
    assert "A user budget names a user" in response.content.decode()
    response = admin_client.post(
        add,
        {
            "name": "alice",
            "scope": "user",
            "user": user.pk,
            "period": "day",
            "token_limit": "5",
            "action": "block",
            "is_active": "on",
        },
    )
    assert response.status_code == 302
    assert Budget.objects.get().user == user
