"""Export: exactly the body each adapter's ``build_payload`` makes; nothing is sent."""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations.domain import normalise_messages
from conversations.models import ToolSetting
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.gemini import GeminiProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import OpenAIProvider
from conversations.selectors import available_tools, history_for_provider
from conversations.services.configuration.providers import completion_options
from tests.conftest import SYSTEM_PROMPT

pytestmark = pytest.mark.django_db

ADAPTERS = {
    "openai": lambda: OpenAIProvider(api_key="k"),
    "anthropic": lambda: AnthropicProvider(api_key="k"),
    "gemini": lambda: GeminiProvider(api_key="k"),
    "ollama": lambda: OllamaProvider(),
}


def export_url(demo_conversation, fmt=None):
    url = reverse("conversations:conversation-export", args=[demo_conversation.pk])
    return url if fmt is None else f"{url}?format={fmt}"


@pytest.fixture
def restricted(profile, history):
    """Two tools allowed by the profile, one of them switched off by an admin."""
    profile.allowed_tools = ["get_weather", "calculate", "get_current_time"]
    profile.save()
    ToolSetting.objects.create(name="get_current_time", enabled=False)
    return profile


def expected(fmt, demo_conversation, profile):
    tools = available_tools(allowed=profile.allowed_tools)
    specs = [tool.spec for tool in tools.values()]
    history = history_for_provider(conversation=demo_conversation, profile=profile)
    options = completion_options(profile, tools_offered=bool(specs))
    return ADAPTERS[fmt]().build_payload(history, specs, options)


@pytest.mark.parametrize("fmt", list(ADAPTERS))
def test_export_equals_the_adapters_payload(api, demo_conversation, restricted, fmt):
    response = api.get(export_url(demo_conversation, fmt))
    assert response.status_code == 200
    assert response.json() == expected(fmt, demo_conversation, restricted)


def test_the_export_offers_the_profiles_tools_and_options(api, demo_conversation, restricted):
    body = api.get(export_url(demo_conversation, "openai")).json()
    assert {t["function"]["name"] for t in body["tools"]} == {"calculate", "get_weather"}
    assert body["tool_choice"] == "auto"
    assert body["temperature"] == 0.5
    assert body["model"] == "demo-model"


def test_openai_is_the_wire_array_of_the_history(api, demo_conversation, history):
    body = api.get(export_url(demo_conversation)).json()  # openai is the default
    stored = history_for_provider(conversation=demo_conversation, profile=demo_conversation.profile)
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    wire = [message.to_dict() for message in stored]
    # The one documented difference: an assistant turn that only calls tools
    # carries content null (its wire form), stored as "".
    for item in wire:
        if item.get("tool_calls") and item["content"] == "":
            item["content"] = None
    assert body["messages"] == wire
    # ...and it reads back into the very same history.
    assert normalise_messages(body["messages"]) == stored
    assert isinstance(body["messages"][2]["tool_calls"][0]["function"]["arguments"], str)


def test_export_sends_nothing_and_needs_no_key(api, demo_conversation, history):
    # The demo profile has no key at all; the HTTP adapters get a placeholder.
    for fmt in ADAPTERS:
        assert api.get(export_url(demo_conversation, fmt)).status_code == 200


def test_an_unknown_format_is_400_listing_the_valid_ones(api, demo_conversation):
    response = api.get(export_url(demo_conversation, "mistral"))
    assert response.status_code == 400
    detail = "Unknown format; valid formats: openai, anthropic, gemini, ollama."
    assert response.json() == {
        "code": "invalid_format",
        "detail": f'Parameter "format": {detail}',
        "errors": [
            {"pointer": None, "parameter": "format", "code": "invalid_format", "detail": detail}
        ],
    }


def test_an_empty_conversation_without_profile_exports_the_defaults(api, user):
    from conversations.models import Conversation

    conversation = Conversation.objects.create(owner=user)
    body = api.get(export_url(conversation, "openai")).json()
    assert body["model"] == "default" and body["messages"] == []
