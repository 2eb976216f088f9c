"""The admin's usage page in a real browser: charts drawn, nothing fetched from elsewhere.

Every database write happens before Playwright starts (its sync API runs an
event loop in this thread, and Django refuses ORM calls from such a thread).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from urllib.parse import urlparse

import pytest

from conversations.domain import Usage
from conversations.models import Budget, Conversation, ModelCall
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import run_tool_loop

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "usage-page-password"
TIMEOUT_MS = 15_000


@pytest.fixture
def spending(django_user_model, profile, language_model):
    admin = django_user_model.objects.create_superuser("root", "root@example.com", PASSWORD)
    language_model.input_price_per_million = Decimal("3")
    language_model.output_price_per_million = Decimal("15")
    language_model.save()
    Budget.objects.create(name="demo monthly", scope="global", period="month", token_limit=10_000)
    conversation = Conversation.objects.create(owner=admin, profile=profile)
    for days_ago in (0, 3):
        provider = ScriptedProvider([scripted_text("ok", usage=Usage(1200, 300))])
        run = run_tool_loop(conversation=conversation, content="hi", provider=provider)
        ModelCall.objects.filter(run=run).update(
            started_at=datetime.now(UTC) - timedelta(days=days_ago)
        )
    return admin


def test_the_usage_page_shows_charts_tops_and_budgets(live_server, spending, browser):
    context = browser.new_context(viewport={"width": 1100, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    problems: list[str] = []
    hosts: set[str] = set()
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda request: hosts.add(urlparse(request.url).netloc))
    page.on(
        "response",
        lambda response: (
            response.status >= 400
            and not response.url.endswith("/favicon.ico")
            and problems.append(f"{response.status} {response.url}")
        ),
    )

    page.goto(f"{live_server.url}/admin/login/?next=/admin/conversations/modelcall/")
    page.fill("#id_username", "root")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.get_by_role("link", name="Usage overview").click()
    expect(page).to_have_url(f"{live_server.url}/admin/conversations/modelcall/usage/")

    for chart in ("#usage-cost-chart", "#usage-token-chart"):
        svg = page.locator(chart)
        expect(svg).to_be_visible()
        expect(svg.locator("rect.usage-bar")).to_have_count(30)
        drawn = svg.locator("rect.usage-bar").evaluate_all(
            "rects => rects.filter(r => r.getBBox().height > 0).length"
        )
        assert drawn == 2
        expect(svg.locator("text.usage-tick")).to_have_count(3)
        # Pointing at a day's column (an empty day too) shows its date and value.
        tip = svg.locator("g.usage-day").nth(10).locator("text.usage-tip")
        expect(tip).to_be_hidden()
        svg.locator("g.usage-day").nth(10).locator("rect.usage-column").hover()
        expect(tip).to_be_visible()
        expect(tip).to_contain_text(": 0")
    expect(page.locator("#usage-total-calls")).to_have_text("2")
    # (1200 * 3 + 300 * 15) * 2 per million = 0.0162
    expect(page.locator("#usage-total-cost")).to_contain_text("0.0162 USD")
    expect(page.locator("#usage-budgets")).to_contain_text("demo monthly")
    expect(page.locator("#usage-budgets meter")).to_have_attribute("value", "30")

    page.locator("table.usage-top").first.get_by_role("link", name="demo-model").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(2)

    assert hosts == {urlparse(live_server.url).netloc}  # offline: nothing from a CDN
    assert problems == []
    context.close()
