"""The admin transcript and a run's trace show the tools the provider ran and the sources cited."""

from __future__ import annotations

import pytest

from conversations.models import Citation, Message, Run
from conversations.providers.anthropic import AnthropicProvider
from conversations.services import run_tool_loop
from conversations.services.transcript.messages import create_conversation
from tests.providers.mock_http import Recorder
from tests.providers.provider_tool_fixtures import ANTHROPIC_SEARCH
from tests.providers.responses_server import whole_reply

from .conftest import admin_url

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
