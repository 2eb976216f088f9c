"""The offline demo's stand-in for a provider's web search: a line ``/search QUERY``.

When a profile of the demo model lists ``web_search`` in its provider tools,
a user message with a line ``/search QUERY`` is answered with one web search
record (as a provider that ran the search itself reports it) and an answer
whose sentences cite two sources. Nothing is searched: the sources are
addresses under ``example.com`` (reserved for examples) naming the query, so
the chat page, the API and the AI SDK stream can be shown and tested offline.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from typing import Final

from conversations.domain import ProviderToolActivity, SourceCitation

__all__ = ["DEMO_SEARCH", "search_answer"]

DEMO_SEARCH: Final = re.compile(r"^\s*/search\s+(\S.*?)\s*$", re.MULTILINE)
"""A line asking the demo to search (for a profile that offers ``web_search``)."""


def search_answer(query: str) -> tuple[str, ProviderToolActivity, tuple[SourceCitation, ...]]:
    """The demo's answer to a search for ``query``: its text, the search, and its citations."""
    quoted = urllib.parse.quote_plus(query)
    sources = (
        (f"https://example.com/search?q={quoted}", f"Example results for {query}"),
        (f"https://example.com/about?q={quoted}", "About example.com"),
    )
    first = f"I searched the web for “{query}” (this is the offline demo: nothing was fetched)."
    second = "These example pages stand in for what a provider would cite."
    content = f"{first} {second}"
    activity = ProviderToolActivity(
        kind="web_search",
        provider_id=f"demo_ws_{hashlib.sha256(query.encode()).hexdigest()[:12]}",
        status="completed",
        query=query,
        result_summary=f"{len(sources)} source(s)",
        payload={"query": query, "sources": [url for url, _ in sources]},
    )
    citations = (
        SourceCitation(start=0, end=len(first), url=sources[0][0], title=sources[0][1]),
        SourceCitation(
            start=len(first) + 1, end=len(content), url=sources[1][0], title=sources[1][1]
        ),
    )
    return content, activity, citations
