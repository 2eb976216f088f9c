"""An agent's work in the card of the call that started it: live, then read back, in a browser.

The demo profile calls its agent ``helper`` (the demo model too) through a
``/call`` line; the helper streams its answer slowly enough to be watched.
Every database write happens before Playwright starts (its event loop runs
in this thread).
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from conversations.models import Profile, Provider

from .test_chat_page import log_in
from .test_chat_streaming import ask, page  # noqa: F401  (a fixture)

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TASK = "Say hello to Leipzig."


@pytest.fixture
def demo_with_agent():
    call_command("setup_demo", stdout=io.StringIO())
    demo = Profile.objects.get(slug="demo")
    helper = Profile.objects.create(
        slug="helper",
        name="Helper",
        description="Greets.",
        language_model=demo.language_model,
    )
    demo.agents.add(helper)
    Provider.objects.filter(slug="demo").update(options={"stream_delay_seconds": 0.1})


def test_an_agents_transcript_shows_in_its_call_card_live_and_after_a_reload(
    live_server,
    demo_with_agent,
    browser,
    page,  # noqa: F811
):
    log_in(page, live_server.url)

    ask(page, "demo", "/call agent_helper " + json.dumps({"task": TASK}))

    card = page.locator("details.llm-tool", has=page.locator("code", has_text="agent_helper"))
    nested = card.locator("details.llm-agent")
    # While the helper works, its card is open and its text grows in it.
    expect(nested.locator("summary")).to_contain_text("helper · working…")
    expect(nested.locator(".llm-agent-text")).not_to_have_text("…")
    expect(nested.locator("summary")).to_contain_text("helper · done")
    expect(card.locator(".llm-badge").first).to_have_text("Succeeded")
    # The helper's answer is the call's result.
    answer = card.locator(".llm-tool-result").text_content()
    assert answer

    # Read back from the agent's conversation: closed until opened.
    page.reload()
    card = page.locator("details.llm-tool", has=page.locator("code", has_text="agent_helper"))
    expect(card.locator(".llm-badge").first).to_have_text("Succeeded")
    card.locator("summary").first.click()
    nested = card.locator("details.llm-agent")
    expect(nested).not_to_have_attribute("open", "")
    nested.locator("summary").click()
    lines = nested.locator(".llm-agent-line")
    expect(lines.first).to_have_text(f"Task {TASK}")
    expect(lines.last).to_have_text(f"Agent {answer}")
    # Its conversation is not in the list: only the caller's is.
    expect(page.locator("#llm-conversations li")).to_have_count(1)
    assert page.errors == []
