"""A web search turn (and a code run) from each vendor, in its documented wire format, whole and streamed.

- The Responses API: a ``reasoning`` item, a ``web_search_call`` item (its
  ``search`` action with the query and sources) and a ``message`` whose
  ``output_text`` carries ``url_citation`` annotations; streamed as
  ``response.output_item.*``, ``response.web_search_call.*``,
  ``response.output_text.delta`` and ``.annotation.added`` events (see
  :mod:`tests.providers.responses_server`).
- Anthropic's Messages API with the ``web_search_20250305`` server tool: a
  text block, a ``server_tool_use`` block, its ``web_search_tool_result``
  and text blocks with ``web_search_result_location`` citations; streamed as
  ``content_block_start``/``_delta`` (``input_json_delta``,
  ``citations_delta``, ``text_delta``)/``_stop`` events. A turn it paused
  (``pause_turn``) after one search, and the continuation with a second.
- Gemini with ``google_search``: one candidate with ``groundingMetadata``
  (``webSearchQueries``, ``groundingChunks``, ``groundingSupports`` whose
  segments count UTF-8 bytes); with ``code_execution``: ``executableCode``
  and ``codeExecutionResult`` parts; streamed as one chunk per part, the
  metadata with the last.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from tests.providers.mock_stream import sse_event
from tests.providers.responses_server import (
    message_item,
    reasoning_item,
    response_body,
    web_search_item,
)

__all__ = [
    "ANTHROPIC_PAUSED",
    "ANTHROPIC_RESUMED",
    "ANTHROPIC_SEARCH",
    "GEMINI_CODE",
    "GEMINI_SEARCH",
    "RESPONSES_SEARCH",
    "anthropic_stream",
    "gemini_stream",
]

# The Responses API ------------------------------------------------------------------

RESPONSES_TEXT = "Python 3.13 was released on October 7, 2024."
RESPONSES_SEARCH = response_body(
    [
        reasoning_item("rs_ws", ["Search for the release date."], "gAAAAB-encrypted-ws=="),
        web_search_item(
            "ws_68a1", "python 3.13 release date", ["https://www.python.org/downloads/"]
        ),
        message_item(
            "msg_ws",
            RESPONSES_TEXT,
            [
                {
                    "type": "url_citation",
                    "start_index": 0,
                    "end_index": len(RESPONSES_TEXT) - 1,
                    "url": "https://www.python.org/downloads/release/python-3130/",
                    "title": "Python Release Python 3.13.0",
                }
            ],
        ),
    ],
    usage=(320, 60, 0, 24),
)

# Anthropic ----------------------------------------------------------------------------

ANTHROPIC_SEARCH: dict[str, Any] = {
    "id": "msg_01Search",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "I'll search for when Claude Shannon was born."},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "name": "web_search",
            "input": {"query": "claude shannon birth date"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
                    "title": "Claude Shannon - Wikipedia",
                    "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1k",
                    "page_age": "April 30, 2025",
                }
            ],
        },
        {"type": "text", "text": "Based on the search results, "},
        {
            "type": "text",
            "text": "Claude Shannon was born on April 30, 1916, in Petoskey, Michigan",
            "citations": [
                {
                    "type": "web_search_result_location",
                    "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
                    "title": "Claude Shannon - Wikipedia",
                    "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm",
                    "cited_text": "Claude Elwood Shannon (April 30, 1916 - February 24, 2001) was",
                }
            ],
        },
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 6039,
        "output_tokens": 931,
        "server_tool_use": {"web_search_requests": 1},
    },
}


def anthropic_search(call_id: str, query: str, url: str) -> list[dict[str, Any]]:
    """A ``server_tool_use`` block and the ``web_search_tool_result`` block answering it."""
    return [
        {"type": "server_tool_use", "id": call_id, "name": "web_search", "input": {"query": query}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": call_id,
            "content": [
                {
                    "type": "web_search_result",
                    "url": url,
                    "title": "A page",
                    "encrypted_content": "EqgfCioIARgB",
                }
            ],
        },
    ]


def anthropic_body(content: list[dict[str, Any]], stop_reason: str, **usage: Any) -> dict[str, Any]:
    """A Messages response body."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


PAUSED_TEXT = "Let me look that up."
RESUMED_TEXT = "He was born on April 30, 1916, in Petoskey, Michigan."
ANTHROPIC_PAUSED = anthropic_body(
    [
        {"type": "text", "text": PAUSED_TEXT},
        *anthropic_search("srvtoolu_01", "claude shannon birth date", "https://example.org/date"),
    ],
    "pause_turn",
    input_tokens=100,
    output_tokens=20,
    server_tool_use={"web_search_requests": 1},
)
ANTHROPIC_RESUMED = anthropic_body(
    [
        *anthropic_search("srvtoolu_02", "claude shannon birthplace", "https://example.org/place"),
        {
            "type": "text",
            "text": RESUMED_TEXT,
            "citations": [
                {
                    "type": "web_search_result_location",
                    "url": "https://example.org/place",
                    "title": "A page",
                    "encrypted_index": "Eo8BCioIAhgB",
                    "cited_text": "born in Petoskey",
                }
            ],
        },
    ],
    "end_turn",
    input_tokens=300,
    output_tokens=40,
    cache_read_input_tokens=50,
    server_tool_use={"web_search_requests": 1},
)
"""What follows :data:`ANTHROPIC_PAUSED`: only the rest of the turn."""


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, block: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    kind = block["type"]
    events: list[tuple[str, dict[str, Any]]] = []

    def delta(value: dict[str, Any]) -> None:
        events.append(("content_block_delta", {"index": index, "delta": value}))

    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        events.append(("content_block_start", {"index": index, "content_block": start}))
        for citation in block.get("citations") or ():
            delta({"type": "citations_delta", "citation": copy.deepcopy(citation)})
        for piece in _pieces(block["text"]):
            delta({"type": "text_delta", "text": piece})
    elif kind == "server_tool_use":
        start = {**copy.deepcopy(dict(block)), "input": {}}
        events.append(("content_block_start", {"index": index, "content_block": start}))
        for piece in _pieces(json.dumps(block["input"])):
            delta({"type": "input_json_delta", "partial_json": piece})
    else:  # a result block arrives whole
        events.append(
            ("content_block_start", {"index": index, "content_block": copy.deepcopy(dict(block))})
        )
    events.append(("content_block_stop", {"index": index}))
    return events


def anthropic_stream(body: Mapping[str, Any]) -> httpx.Response:
    """``body`` as the Messages API streams it."""
    started = {**copy.deepcopy(dict(body)), "content": [], "stop_reason": None}
    started["usage"] = {"input_tokens": body["usage"]["input_tokens"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": started})]
    for index, block in enumerate(body["content"]):
        events += _block_events(index, block)
    events.append(
        (
            "message_delta",
            {
                "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                "usage": copy.deepcopy(body["usage"]),
            },
        )
    )
    events.append(("message_stop", {}))
    text = "".join(sse_event(name, json.dumps({"type": name, **data})) for name, data in events)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())


# Gemini -------------------------------------------------------------------------------

GEMINI_TEXT = "España ganó la Euro 2024. Venció a Inglaterra 2-1 en la final."
_FIRST = "España ganó la Euro 2024."
GEMINI_SEARCH: dict[str, Any] = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": GEMINI_TEXT}]},
            "finishReason": "STOP",
            "groundingMetadata": {
                "webSearchQueries": ["UEFA Euro 2024 winner", "who won euro 2024"],
                "searchEntryPoint": {"renderedContent": "<div>search chips</div>"},
                "groundingChunks": [
                    {
                        "web": {
                            "uri": "https://vertexaisearch.cloud.google.com/g/1",
                            "title": "uefa.com",
                        }
                    },
                    {
                        "web": {
                            "uri": "https://vertexaisearch.cloud.google.com/g/2",
                            "title": "bbc.com",
                        }
                    },
                ],
                "groundingSupports": [
                    {
                        "segment": {
                            "startIndex": 0,
                            "endIndex": len(_FIRST.encode()),
                            "text": _FIRST,
                        },
                        "groundingChunkIndices": [0],
                    },
                    {
                        "segment": {
                            "startIndex": len(_FIRST.encode()) + 1,
                            "endIndex": len(GEMINI_TEXT.encode()),
                            "text": GEMINI_TEXT[len(_FIRST) + 1 :],
                        },
                        "groundingChunkIndices": [0, 1],
                    },
                ],
            },
        }
    ],
    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 30, "totalTokenCount": 42},
    "modelVersion": "gemini-2.5-flash",
}

GEMINI_CODE: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Let me add the first 50 primes."},
                    {
                        "executableCode": {
                            "language": "PYTHON",
                            "code": "import sympy\nprint(sum(sympy.primerange(2, 230)))\n",
                        }
                    },
                    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "5117\n"}},
                    {"text": "The sum of the first 50 primes is 5117."},
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 40, "totalTokenCount": 60},
    "modelVersion": "gemini-2.5-flash",
}


def gemini_stream(body: Mapping[str, Any]) -> httpx.Response:
    """``body`` as ``streamGenerateContent?alt=sse`` sends it: a chunk per part, the end last."""
    candidate = body["candidates"][0]
    parts: Sequence[Mapping[str, Any]] = candidate["content"]["parts"]
    chunks: list[dict[str, Any]] = []
    for index, part in enumerate(parts):
        chunk_candidate: dict[str, Any] = {"content": {"role": "model", "parts": [dict(part)]}}
        if index == len(parts) - 1:
            chunk_candidate.update(
                {k: copy.deepcopy(v) for k, v in candidate.items() if k != "content"}
            )
        chunks.append(
            {
                "candidates": [chunk_candidate],
                "usageMetadata": body["usageMetadata"],
                "modelVersion": body["modelVersion"],
            }
        )
    text = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())
