"""The chat page marks where the model's view of a long conversation begins."""

from __future__ import annotations

import pytest

from conversations.domain import ChatMessage
from conversations.models import ModelCall, Profile
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import append_messages, create_conversation, run_tool_loop

from .test_chat_features import opened
from .transcripts import demo_user

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def long_talk():
    """A conversation three windows long whose last answer was sent only its newest turns."""
    owner = demo_user()
    profile = Profile.objects.select_related("language_model").get(is_default=True)
    model = profile.language_model
    # Room for about 2,000 tokens of history beside the answer, the tools and the margin.
    model.context_window = (profile.max_tokens or model.max_output_tokens or 4096) + 3000
    model.save()
    conversation = create_conversation(owner=owner, title="Long talk", profile=profile)
    text = "w" * 1600
    messages = []
    for index in range(6):
        messages += [
            ChatMessage.user(f"q{index} {text}"),
            ChatMessage.assistant(f"a{index} {text}"),
        ]
    append_messages(conversation=conversation, messages=messages)
    run_tool_loop(
        conversation=conversation,
        content="And now?",
        provider=ScriptedProvider([scripted_text("Noted.")]),
    )
    return conversation, ModelCall.objects.get(conversation=conversation).first_position


def test_the_page_marks_where_the_models_view_begins(live_server, long_talk, browser):
    conversation, first = long_talk
    assert first > 0
    page = opened(browser, live_server.url, conversation)
    marker = page.locator(".llm-view-start")
    expect(marker).to_have_count(1)
    expect(marker).to_have_text("Earlier messages are not sent to the model")
    expect(marker).to_have_attribute("data-first-position", str(first))
    # Right before the first message sent; every stored message is still shown.
    following = page.locator(".llm-view-start + .llm-msg")
    expect(following).to_have_attribute("data-position", str(first))
    expect(page.locator(".llm-msg[data-position]")).to_have_count(14)
    assert page.errors == []
    page.context.close()
