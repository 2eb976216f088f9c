"""A fake Responses API: whole response bodies, and the typed events that stream them.

The shapes follow OpenAI's API reference for ``POST /v1/responses`` (the
``Response`` object) and its streaming events (``response.created``,
``response.output_item.added`` / ``.done``, ``response.output_text.delta``,
``response.reasoning_summary_text.delta``,
``response.function_call_arguments.delta``, the web search call's
``response.web_search_call.in_progress`` / ``.searching`` / ``.completed``,
``response.output_text.annotation.added``, ``response.completed``); the
conformance tests check every one of them against the official ``openai``
SDK's types, so the fixtures cannot drift from the documented wire.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

__all__ = [
    "call_item",
    "message_item",
    "reasoning_item",
    "response_body",
    "stream_events",
    "streamed_reply",
    "web_search_item",
    "whole_reply",
]


def reasoning_item(item_id: str, summary: Sequence[str], encrypted: str | None) -> dict[str, Any]:
    """An output ``reasoning`` item (with ``encrypted_content`` when asked to include it)."""
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def message_item(
    item_id: str, text: str, annotations: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """An output ``message`` item with one ``output_text`` part (and its annotations)."""
    return {
        "type": "message",
        "id": item_id,
        "status": "completed",
        "role": "assistant",
        "content": [
            {
                "type": "output_text",
                "text": text,
                "annotations": [copy.deepcopy(dict(note)) for note in annotations],
            }
        ],
    }


def web_search_item(item_id: str, query: str, sources: Sequence[str]) -> dict[str, Any]:
    """An output ``web_search_call`` item whose ``search`` action found ``sources``."""
    return {
        "type": "web_search_call",
        "id": item_id,
        "status": "completed",
        "action": {
            "type": "search",
            "query": query,
            "sources": [{"type": "url", "url": url} for url in sources],
        },
    }


def call_item(item_id: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """An output ``function_call`` item."""
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def response_body(
    output: Sequence[Mapping[str, Any]],
    *,
    usage: tuple[int, int, int, int] = (10, 5, 0, 0),
    status: str = "completed",
    model: str = "gpt-5-mini-2025-08-07",
    incomplete_reason: str | None = None,
) -> dict[str, Any]:
    """A whole ``Response`` object; ``usage`` is (input, output, cached, reasoning) tokens."""
    prompt, completion, cached, reasoning = usage
    return {
        "id": "resp_0123",
        "object": "response",
        "created_at": 1764600000,
        "status": status,
        "error": None,
        "incomplete_details": (
            {"reason": incomplete_reason} if incomplete_reason is not None else None
        ),
        "instructions": None,
        "model": model,
        "output": [copy.deepcopy(dict(item)) for item in output],
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + completion,
        },
    }


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _item_events(index: int, item: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """``output_item.added``, the item's deltas, ``output_item.done``."""
    started = copy.deepcopy(dict(item))
    kind = item["type"]
    if kind == "message":
        started["content"], started["status"] = [], "in_progress"
    elif kind == "function_call":
        started["arguments"], started["status"] = "", "in_progress"
    elif kind == "reasoning":
        started["summary"] = []
    elif kind == "web_search_call":
        started["status"] = "in_progress"
    yield {"type": "response.output_item.added", "output_index": index, "item": started}
    if kind == "message":
        for part_index, part in enumerate(item["content"]):
            for piece in _pieces(part["text"]):
                yield {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": part_index,
                    "delta": piece,
                    "logprobs": [],
                }
            for note_index, note in enumerate(part.get("annotations") or ()):
                yield {
                    "type": "response.output_text.annotation.added",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": part_index,
                    "annotation_index": note_index,
                    "annotation": dict(note),
                }
    elif kind == "web_search_call":
        for stage in ("in_progress", "searching", "completed"):
            yield {
                "type": f"response.web_search_call.{stage}",
                "item_id": item["id"],
                "output_index": index,
            }
    elif kind == "function_call":
        for piece in _pieces(item["arguments"]):
            yield {
                "type": "response.function_call_arguments.delta",
                "item_id": item["id"],
                "output_index": index,
                "delta": piece,
            }
        yield {
            "type": "response.function_call_arguments.done",
            "item_id": item["id"],
            "output_index": index,
            "arguments": item["arguments"],
        }
    elif kind == "reasoning":
        for summary_index, part in enumerate(item["summary"]):
            for piece in _pieces(part["text"]):
                yield {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "summary_index": summary_index,
                    "delta": piece,
                }
    yield {"type": "response.output_item.done", "output_index": index, "item": dict(item)}


def stream_events(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The events that stream ``body``, numbered by ``sequence_number``."""
    started = copy.deepcopy(dict(body))
    started["status"], started["output"], started["usage"] = "in_progress", [], None
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
    for index, item in enumerate(body["output"]):
        events += _item_events(index, item)
    final = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append({"type": final, "response": copy.deepcopy(dict(body))})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def whole_reply(body: Mapping[str, Any]) -> httpx.Response:
    """The reply of a request without ``stream``."""
    return httpx.Response(200, json=dict(body))


def streamed_reply(body: Mapping[str, Any]) -> httpx.Response:
    """The reply of a request with ``"stream": true``: each event as ``event:``/``data:``."""
    text = "".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in stream_events(body)
    )
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())
