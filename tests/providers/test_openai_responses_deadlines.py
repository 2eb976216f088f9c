"""The Responses API stream's idle bound: which of its typed events count as news."""

from __future__ import annotations

import json
from typing import Any

from conversations.domain import CompletionResponse, TextDelta, ToolCallDelta
from conversations.providers.openai_responses import OpenAIResponsesProvider
from conversations.providers.openai_responses_stream import ResponsesStreamParser
from conversations.providers.streaming import iter_lines, sse_records
from tests.fake_provider import WIRES, FakeAnswer, FakeProviderServer, paced
from tests.providers.test_stream_deadlines import adapter, drain

WIRE = WIRES["openai_responses"]
USAGE = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}


def event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def call_item(arguments: str = "") -> dict[str, Any]:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add"}
    return {**item, "arguments": arguments}


def parser() -> ResponsesStreamParser:
    provider = OpenAIResponsesProvider(api_key="sk-test", base_url="http://127.0.0.1:9")
    return provider.stream_parser()


def news(parser: ResponsesStreamParser, data: bytes) -> list[bool]:
    """For each record of ``data``: whether it changed the parser's progress."""
    changed = []
    for kind, text in sse_records(iter_lines([data])):
        before = parser.progress()
        list(parser.feed(kind, text))
        changed.append(parser.progress() != before)
    return changed


def test_lifecycle_unknown_and_keep_alive_records_are_not_news():
    current = parser()
    records = (
        WIRE.start
        + WIRE.keep_alive
        + event("response.in_progress", response={"status": "in_progress"})
        + event("response.content_part.added", output_index=0, content_index=0)
        + event("response.output_text.done", output_index=0, content_index=0, text="")
        + event("response.some_future_event", output_index=0)
    )
    assert news(current, records) == [False] * 5  # the comment is no record at all


def test_function_call_items_and_the_final_response_are_news():
    current = parser()
    records = (
        event("response.output_item.added", output_index=0, item=call_item())
        + event("response.output_item.done", output_index=0, item=call_item('{"a": 1}'))
        + event(
            "response.completed",
            response={"status": "completed", "output": [call_item('{"a": 1}')], "usage": USAGE},
        )
    )
    assert news(current, records) == [True, True, True]
    assert current.finish().tool_calls[0].arguments == {"a": 1}


def test_an_incomplete_response_is_news():
    current = parser()
    incomplete = {**WIRE.whole("Hi"), "status": "incomplete"}
    assert news(current, event("response.incomplete", response=incomplete)) == [True]


def test_records_without_deltas_restart_the_idle_bound_over_the_wire():
    # After the text, item after item completes every 20 ms for two seconds
    # without a delta: twice the idle bound in all, never a second of silence.
    items = [
        event(
            "response.output_item.done", output_index=i, item={"type": "reasoning", "summary": []}
        )
        for i in range(1, 101)
    ]
    pieces = [WIRE.start + WIRE.delta("Hi"), *items, WIRE.ending("Hi")]
    answer = FakeAnswer(b"", content_type=WIRE.content_type, pieces=paced(pieces, every=0.02))
    with FakeProviderServer(answer) as server:
        shown, error = drain(adapter("openai_responses", server, timeout=1, max_retries=0))
    assert error is None
    assert shown[0] == TextDelta("Hi")
    assert isinstance(shown[-1], CompletionResponse) and shown[-1].content == "Hi"


def test_streamed_call_arguments_keep_the_stream_open_to_its_end():
    arguments = [
        event("response.function_call_arguments.delta", output_index=0, delta=piece)
        for piece in ['{"a"', ": ", "1}"]
    ]
    final = {"status": "completed", "output": [call_item('{"a": 1}')], "usage": USAGE}
    pieces = [
        event("response.output_item.added", output_index=0, item=call_item()),
        *arguments,
        event("response.output_item.done", output_index=0, item=call_item('{"a": 1}')),
        event("response.completed", response=final),
    ]
    answer = FakeAnswer(b"", content_type=WIRE.content_type, pieces=paced(pieces, every=0.01))
    with FakeProviderServer(answer) as server:
        shown, error = drain(adapter("openai_responses", server, timeout=5))
    assert error is None
    assert [type(event) for event in shown[:-1]] == [ToolCallDelta] * 4
    assert shown[-1].tool_calls[0].arguments == {"a": 1}
