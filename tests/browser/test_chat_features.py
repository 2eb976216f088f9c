"""The chat page's everyday features in a real browser.

Rendered and sanitised Markdown, copying, search that opens a conversation
at the message, rename and delete, date groups, the drawer on a phone,
keyboard shortcuts and a stopped answer's token estimate. The conversations
are stored before Playwright starts (its event loop runs in this thread).
"""

from __future__ import annotations

import re

import pytest

from .test_chat_page import TIMEOUT_MS, log_in, save_screenshot
from .transcripts import (
    age,
    conversation_with,
    demo_user,
    long_conversation,
    markdown_conversation,
    stopped_conversation,
    stopped_turn_conversation,
)

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def owner():
    return demo_user()


# Each test's rows come from a fixture listed before ``browser``: once Playwright
# runs, this thread may not touch the database.


@pytest.fixture
def markdown(owner):
    return markdown_conversation(owner)


@pytest.fixture
def stopped(owner):
    return stopped_conversation(owner)


@pytest.fixture
def stopped_turn(owner):
    return stopped_turn_conversation(owner)


@pytest.fixture
def haystack(owner):
    """A long conversation with "zanzibar" in turn 9, and another one to start from."""
    other = conversation_with(owner, "Other", ("hello", "hi", None))
    return long_conversation(owner, "zanzibar", at_turn=9), other


@pytest.fixture
def chat(owner):
    return conversation_with(owner, "Weekend in Leipzig", ("hello", "hi", None))


@pytest.fixture
def dated(owner):
    conversation_with(owner, "Fresh", ("a", "b", None))
    age(conversation_with(owner, "From yesterday", ("a", "b", None)), days=1)
    age(conversation_with(owner, "Ancient", ("a", "b", None)), days=90)


def new_page(browser, width=1100, height=900, **options):
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    return page


def opened(browser, base_url: str, conversation, **options):
    """A logged-in page showing ``conversation`` once its messages are there."""
    page = new_page(browser, **options)
    log_in(page, base_url)
    page.goto(f"{base_url}/chat/{conversation.pk}/")
    expect(page.locator(".llm-msg-assistant").first).to_be_visible()
    return page


def test_an_answer_renders_markdown_and_nothing_hostile_runs(live_server, markdown, browser):
    permissions = ["clipboard-read", "clipboard-write"]
    page = opened(browser, live_server.url, markdown, permissions=permissions)

    answer = page.locator(".llm-msg-assistant .llm-msg-text.llm-markdown")
    expect(answer.locator("h1")).to_have_text("Trip plan")
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator("em")).to_have_text("emphasis")
    expect(answer.locator("ul > li")).to_have_text(["pack", "go"])
    expect(answer.locator("table td")).to_have_text(["Leipzig", "2", "Dresden", "1"])
    guide = answer.get_by_role("link", name="guide")
    expect(guide).to_have_attribute("target", "_blank")
    expect(guide).to_have_attribute("rel", "noopener noreferrer")
    # Highlighted code, framed with its language and a copy button.
    code = answer.locator(".llm-code")
    expect(code.locator(".llm-code-language")).to_have_text("python")
    expect(code.locator(".hljs-keyword").first).to_have_text("def")
    # The hostile parts: no script link, no image, no script; raw HTML is shown as text.
    expect(answer.get_by_text("click me")).not_to_have_attribute("href", re.compile("."))
    assert page.locator("#llm-transcript img, #llm-transcript script").count() == 0
    expect(answer).to_contain_text('<img src=x onerror="window.injected=2">')
    answer.get_by_text("click me").click()
    assert page.evaluate("window.injected") is None

    code.get_by_role("button", name="Copy code").click()
    expect(code.get_by_role("button", name="Copied")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == 'def greet(name):\n    return f"Hello {name}"\n'
    page.get_by_role("button", name="Copy answer").click()
    expect(page.locator(".llm-msg-footer").get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()").startswith("# Trip plan\n")
    assert page.errors == []
    page.context.close()


def test_a_stopped_answer_shows_its_estimated_token_count(live_server, stopped, browser):
    page = opened(browser, live_server.url, stopped)
    answer = page.locator(".llm-msg-assistant")
    expect(answer.locator(".llm-msg-text")).to_have_text("Once upon a time there was a")
    expect(answer.locator(".llm-msg-meta")).to_have_text("demo-1 · about 42 tokens, stopped")
    page.context.close()


def test_the_calls_of_a_stopped_turn_read_as_skipped(live_server, stopped_turn, browser):
    page = new_page(browser)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/chat/{stopped_turn.pk}/")
    cards = page.locator("details.llm-tool")
    expect(cards.locator(".llm-badge")).to_have_text(["Skipped", "Skipped"])
    expect(cards.first).to_have_attribute("data-status", "cancelled")
    expect(page.locator(".llm-run")).to_contain_text("Stopped")
    assert page.errors == []
    page.context.close()


def test_search_opens_the_conversation_at_the_message_found(live_server, haystack, browser):
    conversation, other = haystack
    page = opened(browser, live_server.url, other, height=700)
    expect(page.locator("#llm-title")).to_have_text("Other")

    page.get_by_role("searchbox", name="Search messages").fill("zanzibar")
    page.get_by_role("searchbox", name="Search messages").press("Enter")
    results = page.get_by_role("region", name="Search results").locator("a")
    expect(results).to_have_count(1)
    expect(results.locator("mark")).to_have_text("zanzibar")
    results.first.click()

    # Turn 9's question is message 18.
    expect(page).to_have_url(f"{live_server.url}/chat/{conversation.pk}/#message-18")
    found = page.locator(".llm-msg[data-position='18']")
    expect(found).to_have_class(re.compile(r"\bllm-found\b"))
    expect(found).to_be_focused()
    expect(found).to_be_in_viewport()
    expect(found).to_contain_text("zanzibar question 9")
    # The address opens the same message after a reload.
    page.reload()
    expect(page.locator(".llm-msg[data-position='18']")).to_be_in_viewport()
    assert page.errors == []
    page.context.close()


def test_a_conversation_is_renamed_and_deleted_after_a_confirmation(live_server, chat, browser):
    conversation = chat
    page = opened(browser, live_server.url, conversation)
    page.get_by_role("button", name="Rename").click()
    title = page.get_by_role("textbox", name="Conversation title")
    expect(title).to_be_focused()
    title.fill("New name")
    title.press("Enter")
    expect(page.locator("#llm-title")).to_have_text("New name")
    expect(page.locator("#llm-conversations a[aria-current=page]")).to_contain_text("New name")
    page.reload()
    expect(page.locator("#llm-title")).to_have_text("New name")

    # Cancel keeps it; confirming deletes it.
    page.get_by_role("button", name="Delete").click()
    dialog = page.get_by_role("dialog", name="Delete this conversation?")
    expect(dialog).to_contain_text("New name")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#llm-conversations a")).to_have_count(1)
    page.get_by_role("button", name="Delete").click()
    dialog.get_by_role("button", name="Delete").click()
    expect(page).to_have_url(f"{live_server.url}/chat/")
    expect(page.locator("#llm-conversations a")).to_have_count(0)
    expect(page.locator("#llm-title")).to_have_text("New conversation")
    gone = page.request.get(f"{live_server.url}/api/conversations/{conversation.pk}/")
    assert gone.status == 404
    assert page.errors == []
    page.context.close()


def test_conversations_are_grouped_by_date(live_server, dated, browser):
    page = new_page(browser)
    log_in(page, live_server.url)
    groups = page.locator(".llm-conv-group")
    expect(groups.locator(".llm-conv-group-title")).to_have_text(["Today", "Yesterday", "Older"])
    expect(groups.nth(1).locator(".llm-conv-title")).to_have_text("From yesterday")
    expect(groups.nth(2).locator(".llm-conv-title")).to_have_text("Ancient")
    page.context.close()


def test_on_a_phone_the_sidebar_is_a_drawer(live_server, chat, browser):
    conversation = chat
    page = new_page(browser, width=390, height=844, color_scheme="dark")
    log_in(page, live_server.url)
    sidebar = page.get_by_role("complementary", name="Conversations")
    toggle = page.get_by_role("button", name="Conversations")
    # The script has loaded once the profiles are listed.
    expect(page.locator("#llm-profile option[value=demo]")).to_have_count(1)
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(sidebar).to_be_hidden()
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390

    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(sidebar).to_be_visible()
    save_screenshot(page, "chat-phone.png", animations="disabled")
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_focused()

    toggle.click()
    sidebar.get_by_role("link", name=re.compile("Weekend in Leipzig")).click()
    expect(page).to_have_url(f"{live_server.url}/chat/{conversation.pk}/")
    expect(sidebar).to_be_hidden()
    expect(page.locator(".llm-msg-assistant .llm-msg-text")).to_have_text("hi")
    assert page.errors == []
    page.context.close()


def test_keyboard_shortcuts_focus_the_composer_and_start_a_conversation(live_server, chat, browser):
    page = opened(browser, live_server.url, chat)
    page.locator("body").press("/")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    page.keyboard.press("Control+Shift+O")
    expect(page).to_have_url(f"{live_server.url}/chat/")
    expect(page.locator("#llm-title")).to_have_text("New conversation")
    page.context.close()
