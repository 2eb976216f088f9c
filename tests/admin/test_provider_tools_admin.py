"""The admin transcript and a run's trace show the tools the provider ran and the sources cited."""

from __future__ import annotations

import pytest

from conversations.models import Citation, LanguageModel, Message, Profile, Provider, Run
from conversations.providers.anthropic import AnthropicProvider
from conversations.services import run_tool_loop
from conversations.services.transcript.messages import create_conversation
from tests.providers.mock_http import Recorder
from tests.providers.provider_tool_fixtures import ANTHROPIC_SEARCH
from tests.providers.responses_server import whole_reply

from .conftest import admin_url
from .test_config import profile_data

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


@pytest.mark.parametrize("page_of", ["conversation", "run"])
def test_the_transcript_lists_the_search_and_links_the_source(admin_client, searched, page_of):
    subject = searched if page_of == "conversation" else Run.objects.get(conversation=searched)
    page = admin_client.get(admin_url(subject)).content.decode()
    tools = page[page.index('class="llm-provider-tools"') :]
    tools = tools[: tools.index("</ul>")]
    assert "Web search" in tools and "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE" in tools
    assert "query: claude shannon birth date" in tools and "1 result(s)" in tools
    sources = page[page.index('class="llm-sources"') :]
    sources = sources[: sources.index("</ol>")]
    assert (
        '<a href="https://en.wikipedia.org/wiki/Claude_Shannon" rel="noopener noreferrer '
        'nofollow" target="_blank">Claude Shannon - Wikipedia</a>'
    ) in sources


def test_a_source_that_is_not_http_is_shown_as_text_never_as_a_link(admin_client, searched):
    turn = Message.objects.get(conversation=searched, role="assistant")
    Citation.objects.filter(message=turn).update(url="javascript:alert(1)", title="")
    page = admin_client.get(admin_url(searched)).content.decode()
    sources = page[page.index('class="llm-sources"') :]
    sources = sources[: sources.index("</ol>")]
    assert "javascript:alert(1)" in sources and "href" not in sources


def test_the_profile_form_refuses_a_tool_the_adapter_cannot_offer(admin_client, openai_model):
    data = profile_data(openai_model, provider_tools='["web_search"]')
    response = admin_client.post(admin_url(Profile, "add"), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["provider_tools"]
    assert errors == [
        'The openai adapter cannot offer the provider tool "web_search" (it offers: none).'
    ]
    assert not Profile.objects.filter(slug="research").exists()


def test_the_profile_form_names_the_bad_item_of_the_list(admin_client, openai_model):
    data = profile_data(openai_model, provider_tools='["web_search", {"type": "file_search"}]')
    response = admin_client.post(admin_url(Profile, "add"), data)
    (error,) = response.context["adminform"].form.errors["provider_tools"]
    assert error.startswith("provider_tools/1/vector_store_ids: file_search needs at least one")


def test_the_profile_form_stores_the_tools_a_responses_model_offers(admin_client, openai_model):
    record = Provider.objects.create(slug="resp", name="Responses", adapter="openai_responses")
    model = LanguageModel.objects.create(provider=record, model_id="gpt-5")
    tools = '["web_search", {"type": "file_search", "vector_store_ids": ["vs_1"]}]'
    response = admin_client.post(
        admin_url(Profile, "add"), profile_data(model, provider_tools=tools)
    )
    assert response.status_code == 302
    assert Profile.objects.get(slug="research").provider_tools == [
        "web_search",
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
    ]
