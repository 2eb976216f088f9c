"""The API returns an assistant turn's provider tool calls and citations with the message."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import Run
from conversations.providers.anthropic import AnthropicProvider
from conversations.services import run_tool_loop
from conversations.services.transcript.messages import create_conversation
from tests.api.test_events import parse
from tests.providers.mock_http import Recorder
from tests.providers.provider_tool_fixtures import ANTHROPIC_SEARCH
from tests.providers.responses_server import whole_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def searched(profile, user):
    profile.provider_tools = ["web_search"]
    profile.stream = False
    profile.save()
    conversation = create_conversation(owner=user, profile=profile)
    server = Recorder(whole_reply(ANTHROPIC_SEARCH), strict=True)
    adapter = AnthropicProvider(api_key="k", http_client=server.client)
    run_tool_loop(conversation=conversation, content="When?", provider=adapter)
    return conversation


def url(conversation):
    return reverse("conversations:conversation-messages", args=[conversation.pk])


def test_the_answer_carries_its_search_and_its_cited_span(api, searched) -> None:
    user_message, answer = api.get(url(searched)).json()["results"]
    assert user_message["provider_tool_calls"] == [] and user_message["citations"] == []
    assert answer["provider_tool_calls"] == [
        {
            "kind": "web_search",
            "provider": "anthropic",
            "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "status": "completed",
            "query": "claude shannon birth date",
            "code": "",
            "result_summary": "1 result(s)",
        }
    ]
    (citation,) = answer["citations"]
    cited = answer["content"][citation["start"] : citation["end"]]
    assert cited == "Claude Shannon was born on April 30, 1916, in Petoskey, Michigan"
    assert citation["url"] == "https://en.wikipedia.org/wiki/Claude_Shannon"
    assert citation["title"] == "Claude Shannon - Wikipedia"
    # The raw payload (encrypted search results) stays out of the API.
    assert "encrypted" not in str(answer)


def test_another_users_turn_is_not_found(other_api, searched) -> None:
    assert other_api.get(url(searched)).status_code == 404


def test_the_event_stream_sends_them_in_the_assistant_turns_event(user, searched) -> None:
    client = Client()
    client.force_login(user)
    run = Run.objects.get(conversation=searched)
    response = client.get(reverse("conversations:run-events", args=[run.pk]))
    events = parse(b"".join(response.streaming_content))
    (turn,) = [event for event in events if event["event"] == "assistant_turn"]
    message = turn["data"]["message"]
    assert [call["id"] for call in message["provider_tool_calls"]] == [
        "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE"
    ]
    assert [c["url"] for c in message["citations"]] == [
        "https://en.wikipedia.org/wiki/Claude_Shannon"
    ]


def test_the_profile_list_names_the_provider_tools_by_kind_only(api, profile) -> None:
    profile.provider_tools = ["web_search", {"type": "file_search", "vector_store_ids": ["vs_1"]}]
    profile.save()
    (listed,) = api.get(reverse("conversations:profile-list")).json()
    assert listed["provider_tools"] == ["web_search", "file_search"]
