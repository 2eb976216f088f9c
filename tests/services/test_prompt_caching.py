"""Prompt caching: requests mark (or key) the prefix the next one repeats; the record never does."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from rest_framework.test import APIClient

from conversations.domain import ChatMessage, ToolCall, Usage
from conversations.models import LanguageModel, Message, ModelCall, Profile, Provider
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.caching import MAX_BREAKPOINTS, mark_cache_breakpoints
from conversations.providers.demo import DemoProvider
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import append_messages, run_tool_loop
from conversations.services.loop.rounds import prompt_cache_key
from conversations.tools import registry, tool
from tests.providers.mock_http import Recorder
from tests.providers.test_errors import CASES, KEY
from tests.providers.wire_anthropic import validate_anthropic_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def marks(value) -> int:
    return json.dumps(value).count('"cache_control"')


@pytest.fixture
def weather_tools():
    with registry.isolated(empty=True) as tools:

        @tool(registry=tools)
        def zeta_lookup(query: str) -> str:
            """Look something up (registered first)."""
            return query

        @tool(registry=tools)
        def alpha_weather(city: str) -> str:
            """The weather in a city."""
            return city

        yield


def with_history(conversation) -> None:
    call = ToolCall(id="call_1", name="alpha_weather", arguments={"city": "Leipzig"})
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("Weather?"),
            ChatMessage.assistant_tool_calls([call]),
            ChatMessage.tool_result("call_1", "sunny"),
            ChatMessage.assistant("Sunny."),
        ],
    )


def test_an_anthropic_request_marks_tools_system_and_last_message_and_nothing_is_stored(
    api, demo_conversation, profile, weather_tools
):
    profile.stream = False
    profile.save()
    with_history(demo_conversation)
    recorder = Recorder(httpx.Response(200, json=CASES["anthropic"].text_reply), strict=True)
    provider = AnthropicProvider(api_key=KEY, http_client=recorder.client)
    run_tool_loop(conversation=demo_conversation, content="And tomorrow?", provider=provider)
    (body,) = recorder.bodies
    assert validate_anthropic_request(body) == []
    assert marks(body) == 3 <= MAX_BREAKPOINTS
    assert "cache_control" in body["tools"][-1]
    assert [t["name"] for t in body["tools"]] == ["alpha_weather", "zeta_lookup"]
    assert body["system"] == [
        {"type": "text", "text": profile.system_prompt, "cache_control": {"type": "ephemeral"}}
    ]
    last = body["messages"][-1]["content"][-1]
    assert last["text"] == "And tomorrow?" and last["cache_control"] == {"type": "ephemeral"}
    # Never in the record: the stored messages, the dry-run export.
    stored = Message.objects.filter(conversation=demo_conversation)
    assert not any("cache_control" in json.dumps(m.provider_metadata) for m in stored)
    exported = api.get(
        f"/api/conversations/{demo_conversation.pk}/export/", {"format": "anthropic"}
    )
    assert exported.status_code == 200
    assert marks(exported.json()) == 0


def test_marks_already_asked_for_count_towards_the_four():
    payload = {
        "system": "Be brief.",
        "tools": [{"name": "a"}, {"name": "b"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {}}]},
            {"role": "assistant", "content": [{"type": "text", "text": "y", "cache_control": {}}]},
            {"role": "user", "content": "z"},
        ],
    }
    mark_cache_breakpoints(payload)
    assert marks(payload) == MAX_BREAKPOINTS
    assert "cache_control" in payload["tools"][-1] and isinstance(payload["system"], list)
    assert payload["messages"][-1]["content"] == "z"  # no mark left for it


def test_a_thinking_block_is_never_marked():
    payload = {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                ],
            }
        ]
    }
    mark_cache_breakpoints(payload)
    blocks = payload["messages"][0]["content"]
    assert "cache_control" in blocks[0] and "cache_control" not in blocks[1]


@pytest.fixture
def openai_profile(db):
    provider = Provider.objects.create(slug="oa", name="OpenAI", adapter="openai")
    model = LanguageModel.objects.create(provider=provider, model_id="gpt-test")
    return Profile.objects.create(
        slug="oa", name="OpenAI", language_model=model, stream=False, system_prompt="Be brief."
    )


def test_openai_requests_carry_one_stable_cache_key_per_conversation(user, openai_profile):
    from conversations.services import create_conversation

    first = create_conversation(owner=user, profile=openai_profile)
    second = create_conversation(owner=user, profile=openai_profile)
    reply = httpx.Response(200, json=CASES["openai"].text_reply)
    recorder = Recorder(reply)
    provider = CASES["openai"].adapter(api_key=KEY, http_client=recorder.client)
    for conversation, content in ((first, "one"), (first, "two"), (second, "three")):
        run_tool_loop(conversation=conversation, content=content, provider=provider)
    keys = [body["prompt_cache_key"] for body in recorder.bodies]
    assert keys[0] == keys[1] == prompt_cache_key(first.pk) != keys[2]
    assert str(first.pk) not in keys[0] and re.fullmatch(r"conv-[0-9a-f]{32}", keys[0])


def test_an_openai_compatible_service_gets_no_cache_key(user, openai_profile):
    from conversations.services import create_conversation

    openai_profile.language_model.provider.adapter = "groq"
    openai_profile.language_model.provider.save()
    conversation = create_conversation(owner=user, profile=openai_profile)
    recorder = Recorder(httpx.Response(200, json=CASES["openai"].text_reply))
    provider = CASES["openai"].adapter(api_key=KEY, http_client=recorder.client)
    run_tool_loop(conversation=conversation, content="hi", provider=provider)
    assert "prompt_cache_key" not in recorder.bodies[0]


def test_the_second_demo_turn_reads_the_first_ones_prefix_from_the_cache(demo_conversation):
    provider = DemoProvider()
    run_tool_loop(conversation=demo_conversation, content="Hello there", provider=provider)
    run_tool_loop(conversation=demo_conversation, content="And again", provider=provider)
    first, second = ModelCall.objects.filter(conversation=demo_conversation).order_by("started_at")
    assert first.cached_prompt_tokens == 0
    assert 0 < second.cached_prompt_tokens < second.prompt_tokens


def test_the_usage_page_shows_the_cache_hit_rate_per_model(admin_client, demo_conversation):
    provider = ScriptedProvider(
        [
            scripted_text("ok", usage=Usage(1000, 10)),
            scripted_text("ok", usage=Usage(1000, 10, cached_prompt_tokens=800)),
        ]
    )
    for content in ("one", "two"):
        run_tool_loop(conversation=demo_conversation, content=content, provider=provider)
    html = admin_client.get("/admin/conversations/modelcall/usage/").content.decode()
    assert "<th>Cache hits</th>" in html
    assert re.search(r'class="usage-cache-hits"[^>]*>40%</td>', html)


def test_a_responses_api_request_carries_the_same_key(user, openai_profile):
    from conversations.providers.openai_responses import OpenAIResponsesProvider
    from conversations.services import create_conversation
    from tests.providers.responses_server import message_item, response_body

    openai_profile.language_model.provider.adapter = "openai_responses"
    openai_profile.language_model.provider.save()
    conversation = create_conversation(owner=user, profile=openai_profile)
    body = response_body([message_item("msg_1", "Hello.")])
    recorder = Recorder(httpx.Response(200, json=body))
    provider = OpenAIResponsesProvider(api_key=KEY, http_client=recorder.client)
    run_tool_loop(conversation=conversation, content="hi", provider=provider)
    assert recorder.bodies[0]["prompt_cache_key"] == prompt_cache_key(conversation.pk)


def test_marks_a_profile_adds_through_its_options_count_towards_the_four():
    from conversations.providers.base import CompletionOptions
    from conversations.providers.caching import with_cache_breakpoints

    marked = {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    options = CompletionOptions(
        model="m", cache_key="conv-1", extra={"system": [marked, marked, marked]}
    )
    payload = {
        "system": "ignored",
        "tools": [{"name": "a"}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    body = with_cache_breakpoints(payload, options)
    assert marks(body) == MAX_BREAKPOINTS
    assert "cache_control" in body["tools"][0]
    assert body["messages"][-1]["content"] == "hi"
