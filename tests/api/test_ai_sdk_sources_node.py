"""The real AI SDK (``ai`` on npm) reads a searched answer's sources as ``source-url`` parts.

The demo model stands in for a provider's web search (a ``/search`` line, for
a profile offering ``web_search``): its answer cites two sources, which the
UI message stream sends as ``source-url`` chunks, the SDK folds into the
assistant message's parts, and the history gives back the same.
"""

from __future__ import annotations

import pytest

from conversations.models import Citation, ProviderToolCall
from tests.api.test_ai_sdk_node import node, token, use_chat

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

__all__ = ["node", "token"]  # fixtures, imported for this module's tests


def test_the_ai_sdk_gets_the_cited_sources_as_source_url_parts(
    node, uvicorn, token, demo_conversation
) -> None:
    profile = demo_conversation.profile
    profile.provider_tools = ["web_search"]
    profile.save()
    _, base_url = uvicorn()
    result = use_chat(node, base_url, demo_conversation, token, "/search python 3.13 release")
    assert result["errors"] == []
    assert result["chunkTypes"].count("source-url") == 2
    assert result["chunkTypes"].index("source-url") > result["chunkTypes"].index("text-end")

    streamed = result["streamed"]
    sources = [part for part in streamed["parts"] if part["type"] == "source-url"]
    assert [(s["url"], s["title"]) for s in sources] == [
        (
            "https://example.com/search?q=python+3.13+release",
            "Example results for python 3.13 release",
        ),
        ("https://example.com/about?q=python+3.13+release", "About example.com"),
    ]
    assert [s["sourceId"] for s in sources] == [
        sources[0]["sourceId"].rsplit("-", 1)[0] + "-1",
        sources[0]["sourceId"].rsplit("-", 1)[0] + "-2",
    ]
    # The validated history shows the same parts the stream built.
    assert result["history"][1] == streamed
    (search,) = ProviderToolCall.objects.filter(message__conversation=demo_conversation)
    assert search.query == "python 3.13 release"
    assert Citation.objects.filter(message__conversation=demo_conversation).count() == 2
