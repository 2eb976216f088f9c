"""The chat page's approve and reject buttons on a held tool call, in a real browser.

An admin made the demo's get_weather need the owner's approval; the demo
question then holds the turn, the page shows the buttons on that card only,
and a decision resumes the run. Every database write happens before
Playwright starts (its event loop runs in this thread).
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from conversations.models import ToolSetting

from .test_chat_page import QUESTION, TIMEOUT_MS, log_in

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_with_approval():
    call_command("setup_demo", stdout=io.StringIO())
    ToolSetting.objects.update_or_create(name="get_weather", defaults={"approval": "always"})


def ask(page):
    # The composer is disabled while a run of the page is still being followed
    # (its text can be on the page before the run has ended): wait until it is free.
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    page.get_by_label("Profile").select_option("demo")
    page.get_by_role("button", name="New conversation").click()
    box = page.get_by_role("textbox", name="Message")
    box.fill(QUESTION)
    box.press("Enter")
    cards = page.locator("details.llm-tool")
    expect(cards.locator(".llm-badge")).to_have_text(["Waiting for approval", "Waiting for approval"])
    return cards


def test_approve_and_reject_buttons_decide_a_held_call(live_server, demo_with_approval, browser):
    context = browser.new_context(viewport={"width": 1100, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server.url)

    cards = ask(page)
    weather, clock = cards.nth(0), cards.nth(1)
    # Held calls are shown open; only the call needing approval has the buttons.
    assert weather.get_attribute("open") is not None
    expect(weather.get_by_role("button", name="Approve")).to_be_visible()
    expect(weather.get_by_role("button", name="Reject")).to_be_visible()
    expect(clock.get_by_role("button", name="Approve")).to_have_count(0)
    expect(clock.locator(".llm-approval")).to_contain_text("Waiting for a reviewer")
    expect(page.locator("#llm-alert")).to_be_hidden()

    weather.get_by_role("button", name="Approve").click()
    answer = page.locator(".llm-msg-assistant .llm-msg-text").last
    expect(answer).to_contain_text("In Leipzig it is")
    expect(page.locator("details.llm-tool .llm-badge")).to_have_text(["Succeeded", "Succeeded"])
    expect(page.locator(".llm-approval")).to_have_count(0)

    # A second conversation: rejected with a reason, which the model is told.
    cards = ask(page)
    weather = cards.nth(0)
    weather.get_by_role("textbox", name="Reason for a rejection").fill("not today")
    weather.get_by_role("button", name="Reject").click()
    expect(page.locator("details.llm-tool .llm-badge")).to_have_text(["Rejected", "Succeeded"])
    expect(page.locator("details.llm-tool").nth(0).locator(".llm-tool-result")).to_have_text(
        'Error: tool "get_weather" was rejected by a reviewer: not today'
    )
    expect(page.locator("#llm-alert")).to_be_hidden()
    assert errors == []
    context.close()
