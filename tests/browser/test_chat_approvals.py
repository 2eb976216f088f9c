"""The chat page's approve and reject buttons on a held tool call, in a real browser.

An admin made the demo's get_weather need the owner's approval; the demo
question then holds the turn, the page shows the buttons on that card only,
and a decision resumes the run. Every database write happens before
Playwright starts (its event loop runs in this thread).
"""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from conversations.models import Provider, ToolSetting

from .test_chat_page import QUESTION, log_in
from .test_chat_streaming import grown, page  # noqa: F401  (a fixture)

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_with_approval():
    call_command("setup_demo", stdout=io.StringIO())
    ToolSetting.objects.update_or_create(name="get_weather", defaults={"approval": "always"})


@pytest.fixture
def slow_demo_with_approval(demo_with_approval):
    """The demo provider pauses before each streamed piece, so the resumed answer can be watched."""
    Provider.objects.filter(slug="demo").update(options={"stream_delay_seconds": 0.15})


def ask(page):  # noqa: F811
    # The composer is disabled while a run of the page is still being followed
    # (its text can be on the page before the run has ended): wait until it is free.
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    page.get_by_label("Profile").select_option("demo")
    page.get_by_role("button", name="New conversation").click()
    box = page.get_by_role("textbox", name="Message")
    box.fill(QUESTION)
    box.press("Enter")
    cards = page.locator("details.llm-tool")
    expect(cards.locator(".llm-badge")).to_have_text(
        ["Waiting for approval", "Waiting for approval"]
    )
    return cards


def test_approve_and_reject_buttons_decide_a_held_call(
    live_server,
    demo_with_approval,
    browser,
    page,  # noqa: F811
):
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
    assert page.errors == []


def test_while_a_call_waits_the_composer_says_why_and_the_resumed_run_streams(
    live_server,
    slow_demo_with_approval,
    browser,
    page,  # noqa: F811
):
    log_in(page, live_server.url)

    weather = ask(page).nth(0)
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_be_disabled()
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_disabled()
    expect(page.locator("#llm-composer-reason")).to_have_text(
        re.compile(r"^Waiting for approval: ")
    )
    expect(page.locator("#llm-progress")).to_have_text("Waiting for your approval.")
    # Approve is the primary action; Reject is secondary and destructive, and looks it.
    approve = weather.get_by_role("button", name="Approve")
    reject = weather.get_by_role("button", name="Reject")
    background = "node => getComputedStyle(node).backgroundColor"
    assert approve.evaluate(background) != reject.evaluate(background)
    expect(reject).to_have_class(re.compile(r"\bllm-danger\b"))

    approve.click()
    # The resumed run is followed live: its answer grows in the bubble and Stop shows.
    grown(page, grown(page, ""))
    expect(page.locator("#llm-stop")).to_be_visible()
    expect(page.locator("#llm-composer-reason")).to_be_hidden()
    answer = page.locator(".llm-msg-assistant:not(.llm-live) .llm-msg-text").last
    expect(answer).to_contain_text("In Leipzig it is")
    expect(page.locator(".llm-live")).to_have_count(0)
    expect(page.locator("#llm-stop")).to_be_hidden()
    expect(box).to_be_enabled()
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    assert page.errors == []
