"""Thumbs on the chat page: given on an answer and a tool card, kept across a reload.

The conversation (a scripted run with a tool call) is stored before
Playwright starts; afterwards the page itself asks the API what was stored,
as any client would.
"""

from __future__ import annotations

import pytest

from conversations.models import Conversation
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop

from .test_chat_features import opened
from .transcripts import demo_user

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def with_a_call():
    owner = demo_user()
    conversation = Conversation.objects.create(owner=owner, title="Weather")
    provider = ScriptedProvider(
        [scripted_calls(("get_weather", {"city": "Leipzig"})), scripted_text("Mild in Leipzig.")]
    )
    run_tool_loop(conversation=conversation, content="Weather in Leipzig?", provider=provider)
    return conversation


def stored_feedback(page, conversation):
    return page.evaluate(
        """async (url) => (await fetch(url, {credentials: "same-origin"})).json()""",
        f"/api/conversations/{conversation.pk}/feedback/",
    )


def test_thumbs_on_an_answer_and_a_tool_card_survive_a_reload(live_server, with_a_call, browser):
    page = opened(browser, live_server.url, with_a_call)
    answer = page.locator(".llm-msg-assistant", has_text="Mild in Leipzig.")
    up = answer.locator(".llm-msg-footer .llm-feedback").get_by_role("button", name="Good")
    with page.expect_response(lambda r: r.request.method == "PUT" and r.status == 201):
        up.click()
    expect(up).to_have_attribute("aria-pressed", "true")
    comment = answer.get_by_label("Feedback comment")
    comment.fill("Short and right")
    with page.expect_response(lambda r: r.request.method == "PUT" and r.status == 200):
        answer.get_by_role("button", name="Save comment").click()

    card = page.locator(".llm-tool").first
    card.locator("summary").click()
    down = card.locator(".llm-feedback").get_by_role("button", name="Bad")
    with page.expect_response(lambda r: r.request.method == "PUT" and r.status == 201):
        down.click()
    expect(down).to_have_attribute("aria-pressed", "true")

    page.reload()
    answer = page.locator(".llm-msg-assistant", has_text="Mild in Leipzig.")
    up = answer.locator(".llm-msg-footer .llm-feedback").get_by_role("button", name="Good")
    expect(up).to_have_attribute("aria-pressed", "true")
    expect(answer.get_by_label("Feedback comment")).to_have_value("Short and right")
    card = page.locator(".llm-tool").first
    card.locator("summary").click()
    expect(card.locator(".llm-feedback").get_by_role("button", name="Bad")).to_have_attribute(
        "aria-pressed", "true"
    )
    rows = stored_feedback(page, with_a_call)
    assert sorted((row["value"], row["target"]["kind"], row["comment"]) for row in rows) == [
        (-1, "tool_call", ""),
        (1, "message", "Short and right"),
    ]

    # A second click on a pressed thumb takes it back.
    with page.expect_response(lambda r: r.request.method == "DELETE" and r.status == 204):
        up.click()
    expect(up).to_have_attribute("aria-pressed", "false")
    assert [row["target"]["kind"] for row in stored_feedback(page, with_a_call)] == ["tool_call"]
    assert page.errors == []
