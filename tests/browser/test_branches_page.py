"""The chat page's branches in a real browser: regenerate, switch versions, edit a question.

Every database write happens before Playwright starts (see test_chat_page.py).
"""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from .test_chat_page import QUESTION, TIMEOUT_MS, log_in

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CONVERSATION_URL = re.compile(r".*/chat/[0-9a-f-]{36}/$")


@pytest.fixture
def demo():
    call_command("setup_demo", stdout=io.StringIO())


def test_regenerate_edit_and_switch_between_branches(live_server, demo, browser):
    context = browser.new_context(viewport={"width": 1100, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # Edit and regenerate ask for the branch's run as an event stream, as sending does.
    branch_turns: list[str] = []
    page.on(
        "response",
        lambda r: (
            branch_turns.append(r.headers.get("content-type", ""))
            if r.request.method == "POST" and r.url.endswith(("/regenerate/", "/edit/"))
            else None
        ),
    )
    page.on(
        "response",
        lambda response: (
            response.status >= 400
            and "/api/" in response.url
            and errors.append(f"{response.status} {response.url}")
        ),
    )
    log_in(page, live_server.url)
    page.get_by_label("Profile").select_option("demo")
    page.get_by_role("button", name="New conversation").click()
    box = page.get_by_role("textbox", name="Message")
    box.fill(QUESTION)
    box.press("Enter")
    answer = page.locator(".llm-msg-assistant .llm-msg-text").last
    expect(answer).to_contain_text("In Leipzig it is")
    expect(page).to_have_url(CONVERSATION_URL)
    root_url = page.url
    # Edit on the user message, regenerate on the last answer only.
    expect(page.locator(".llm-msg-user").get_by_role("button", name="Edit")).to_have_count(1)
    expect(page.get_by_role("button", name="Regenerate")).to_have_count(1)
    expect(page.locator(".llm-branch-switch")).to_have_count(0)

    # Regenerate: a new branch opens, answered again, with a 2 / 2 switch on the answer.
    page.get_by_role("button", name="Regenerate").click()
    expect(page).not_to_have_url(root_url)
    expect(page).to_have_url(CONVERSATION_URL)
    switch = page.locator(".llm-msg[data-position='1'] .llm-branch-switch")
    expect(switch.locator(".llm-branch-count")).to_have_text("2 / 2")
    expect(page.locator(".llm-msg-assistant .llm-msg-text").last).to_contain_text("Leipzig")
    # The branch opened while its answer streamed; the page is free again once the run ended.
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    regenerated_url = page.url

    # The switch goes back to the original, which shows 1 / 2 at the same message.
    switch.get_by_role("button", name="Previous version").click()
    expect(page).to_have_url(root_url)
    expect(
        page.locator(".llm-msg[data-position='1'] .llm-branch-switch .llm-branch-count")
    ).to_have_text("1 / 2")
    page.locator(".llm-msg[data-position='1']").get_by_role("button", name="Next version").click()
    expect(page).to_have_url(regenerated_url)

    # Edit the question: another branch, answered, with its own switch on the user message.
    page.goto(root_url)
    page.locator(".llm-msg-user").get_by_role("button", name="Edit").click()
    edit = page.get_by_role("textbox", name="Edited message")
    expect(edit).to_have_value(QUESTION)
    edit.fill("What time is it?")
    page.get_by_role("button", name="Send in a new branch").click()
    expect(page).not_to_have_url(root_url)
    expect(page.locator(".llm-msg-user .llm-msg-text").first).to_have_text("What time is it?")
    expect(page.locator(".llm-msg-assistant").last).to_be_visible()
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    expect(
        page.locator(".llm-msg[data-position='0'] .llm-branch-switch .llm-branch-count")
    ).to_have_text("2 / 2")

    # The sidebar lists the conversation once: branches are reached through the switches.
    expect(page.locator("#llm-conversations li")).to_have_count(1)
    assert branch_turns == ["text/event-stream; charset=utf-8"] * 2
    assert errors == []
    context.close()
