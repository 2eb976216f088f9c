"""The chat page shows what the provider ran itself and the numbered sources of an answer.

The demo model stands in for a provider's web search (a ``/search`` line,
for a profile offering ``web_search``); the page shows the search as a card
and the two cited sources as numbered links, live and after a reload, and a
stored source whose address is not http(s) as text only.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from conversations.models import Citation, Profile

from .test_chat_accessibility import serious_violations
from .test_chat_page import TIMEOUT_MS, log_in
from .test_chat_streaming import ask
from .transcripts import conversation_with, demo_user

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUERY = "python 3.13 release"


@pytest.fixture
def searching_demo():
    call_command("setup_demo", stdout=io.StringIO())
    Profile.objects.filter(slug="demo").update(provider_tools=["web_search"])


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


def check_sources(page) -> None:
    answer = page.locator(".llm-msg-assistant:not(.llm-live)")
    expect(answer.locator(".llm-msg-text")).to_contain_text("I searched the web")
    card = answer.locator("details.llm-provider-tool")
    expect(card).to_have_count(1)
    expect(card.locator("summary")).to_contain_text("Web search")
    expect(card.locator("summary")).to_contain_text(QUERY)
    expect(card.locator("summary")).to_contain_text("2 source(s)")
    links = answer.get_by_role("list", name="Sources").get_by_role("link")
    expect(links).to_have_count(2)
    expect(links.nth(0)).to_have_text(f"[1] Example results for {QUERY}")
    expect(links.nth(1)).to_have_text("[2] About example.com")
    assert links.nth(0).get_attribute("href") == "https://example.com/search?q=python+3.13+release"
    assert links.nth(0).get_attribute("target") == "_blank"
    assert "noopener" in (links.nth(0).get_attribute("rel") or "")


def test_a_searched_answer_shows_its_search_card_and_numbered_sources(
    live_server, searching_demo, browser, page
) -> None:
    log_in(page, live_server.url)
    ask(page, "demo", f"/search {QUERY}")
    check_sources(page)
    page.reload()
    check_sources(page)
    assert serious_violations(page) == []
    assert page.errors == []


@pytest.fixture
def odd_source():
    """A stored answer citing one web page and one address that is not http(s)."""
    conversation = conversation_with(demo_user(), "Odd sources", ("Sources?", "Two sources.", None))
    answer = conversation.messages.get(role="assistant")
    Citation.objects.create(
        message=answer, index=0, start_offset=0, end_offset=3, url="javascript:alert(1)"
    )
    Citation.objects.create(
        message=answer,
        index=1,
        start_offset=4,
        end_offset=12,
        url="https://example.org/",
        title="Fine",
    )
    return conversation


def test_a_source_that_is_not_a_web_address_is_text_not_a_link(
    live_server, odd_source, browser, page
) -> None:
    log_in(page, live_server.url)
    page.get_by_role("link", name="Odd sources").click()
    sources = page.get_by_role("list", name="Sources")
    expect(sources.locator("li")).to_have_count(2)
    expect(sources.locator("li").nth(0)).to_have_text("[1] javascript:alert(1)")
    expect(sources.get_by_role("link")).to_have_count(1)
    expect(sources.get_by_role("link")).to_have_text("[2] Fine")
    assert page.errors == []
