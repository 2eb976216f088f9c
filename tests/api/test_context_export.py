"""The dry-run export shows the view the next call would send: its cut and its summary."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from conversations.domain import ChatMessage
from conversations.models import ContextSummary, LanguageModel, Message, Profile
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import append_messages, run_tool_loop
from conversations.tools import registry

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_tools():
    with registry.isolated(empty=True):
        yield


@pytest.fixture
def windowed(profile):
    model = profile.language_model
    model.context_window = 2000
    model.save()
    return profile


def fill(conversation, turns: int, size: int = 400) -> None:
    text = "w" * (size * 4)
    messages = []
    for index in range(turns):
        messages += [
            ChatMessage.user(f"q{index} {text}"),
            ChatMessage.assistant(f"a{index} {text}"),
        ]
    append_messages(conversation=conversation, messages=messages)


def export(api, conversation, fmt="openai"):
    url = reverse("conversations:conversation-export", args=[conversation.pk])
    return api.get(f"{url}?format={fmt}")


def test_a_short_history_is_exported_whole_from_position_zero(api, demo_conversation, windowed):
    fill(demo_conversation, turns=1, size=20)
    response = export(api, demo_conversation)
    assert response.status_code == 200
    assert response["Context-First-Position"] == "0"
    assert "Context-Summary" not in response
    assert len(response.json()["messages"]) == 1 + 2


def test_a_long_history_is_exported_as_the_view_the_next_call_sends(
    api, demo_conversation, windowed
):
    fill(demo_conversation, turns=6)
    response = export(api, demo_conversation)
    first = int(response["Context-First-Position"])
    assert first > 0
    messages = response.json()["messages"]
    assert messages[0] == {"role": "system", "content": windowed.system_prompt}
    cut = Message.objects.get(conversation=demo_conversation, position=first)
    assert messages[1] == {"role": "user", "content": cut.content}
    assert (
        len(messages) == 1 + Message.objects.filter(conversation=demo_conversation).count() - first
    )


def test_a_summarize_profile_exports_the_summary_it_would_reuse(api, demo_conversation, windowed):
    summarizer = Profile.objects.create(
        slug="sum",
        name="Sum",
        language_model=LanguageModel.objects.create(
            provider=windowed.language_model.provider, model_id="sum-model"
        ),
    )
    windowed.context_strategy, windowed.summary_profile = "summarize", summarizer
    windowed.save()
    fill(demo_conversation, turns=6)
    pending = export(api, demo_conversation)
    assert pending["Context-Summary"].startswith("pending 0-")
    run_tool_loop(
        conversation=demo_conversation,
        content="Go on.",
        provider=ScriptedProvider([scripted_text("Done.")]),
    )
    summary = ContextSummary.objects.get()
    response = export(api, demo_conversation, "anthropic")
    assert response["Context-Summary"] == f"0-{summary.last_position}"
    assert response["Context-First-Position"] == str(summary.last_position + 1)
    body = response.json()
    assert summary.content in body["system"]
    assert "cache_control" not in json.dumps(body)
    assert ContextSummary.objects.count() == 1  # the export wrote nothing


def test_a_message_no_window_holds_is_a_422_naming_it(api, demo_conversation, windowed):
    append_messages(conversation=demo_conversation, messages=[ChatMessage.user("x" * 12_000)])
    response = export(api, demo_conversation)
    assert response.status_code == 422
    assert response.json()["code"] == "context_too_large"
    assert "position 0" in response.json()["detail"]


def test_another_users_conversation_is_not_exported(other_api, demo_conversation, windowed):
    assert export(other_api, demo_conversation).status_code == 404
