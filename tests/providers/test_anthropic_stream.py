"""AnthropicProvider.stream: the Messages event stream, cut anywhere, gives the whole answer.

Each generated answer is rendered twice, as the Messages response body and as
the event stream Anthropic sends for it; the stream's bytes are cut at
arbitrary points and served through ``httpx.MockTransport``. The streamed
response must equal ``parse_response`` of the whole body, and the deltas must
add up to its text, thinking and call arguments.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    TextDelta,
    ToolCall,
    ToolCallDelta,
)
from conversations.exceptions import (
    ProviderAuthenticationError,
    ProviderHTTPError,
    ProviderRateLimited,
    ProviderResponseError,
)
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.base import CompletionOptions
from conversations.providers.boundary import check_response
from tests.providers.mock_http import provider_with_replies
from tests.providers.mock_stream import broken_stream, collect, shown, sse_event, streamed
from tests.strategies import cut_points, split_bytes, streamed_answers

KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-test-1"
OPTIONS = CompletionOptions(model=MODEL)
HISTORY = [ChatMessage.user("What is 2 + 3?")]


# Rendering one answer ----------------------------------------------------------------


def _blocks(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of the whole body (with the stream's pieces alongside)."""
    blocks: list[dict[str, Any]] = []
    if answer["signature"] is not None:
        blocks.append(
            {
                "type": "thinking",
                "thinking": "".join(answer["reasoning"]),
                "signature": answer["signature"],
            }
        )
    if "".join(answer["text"]):
        blocks.append({"type": "text", "text": "".join(answer["text"])})
    for call in answer["calls"]:
        blocks.append(
            {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["arguments"]}
        )
    return blocks


def _stop_reason(answer: dict[str, Any]) -> str:
    return "tool_use" if answer["calls"] else "end_turn"


def whole_body(answer: dict[str, Any]) -> dict[str, Any]:
    usage = answer["usage"]
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": _blocks(answer),
        "stop_reason": _stop_reason(answer),
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage["input"],
            "cache_read_input_tokens": usage["cached"],
            "output_tokens": usage["output"],
        },
    }


def stream_events(answer: dict[str, Any], *, message_stop: bool = True) -> list[dict[str, Any]]:
    """The events Anthropic sends for ``answer``, in order."""
    usage = answer["usage"]
    start = {**whole_body(answer), "content": [], "stop_reason": None}
    start["usage"] = {
        "input_tokens": usage["input"],
        "cache_read_input_tokens": usage["cached"],
        "output_tokens": 1,
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    calls = iter(answer["calls"])
    for index, block in enumerate(_blocks(answer)):
        kind = block["type"]
        if kind == "thinking":
            opened = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in answer["reasoning"]]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in answer["text"]]
        else:
            call = next(calls)
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in call["pieces"]]
        events.append({"type": "content_block_start", "index": index, "content_block": opened})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(answer), "stop_sequence": None},
            "usage": {"output_tokens": usage["output"]},
        }
    )
    if message_stop:
        events.append({"type": "message_stop"})
    return events


def sse(events: list[dict[str, Any]], newline: str = "\n") -> bytes:
    return "".join(
        sse_event(event["type"], json.dumps(event, ensure_ascii=False), newline) for event in events
    ).encode("utf-8")


def run(*replies: Any, history: list[ChatMessage] = HISTORY, **kwargs: Any) -> Any:
    """The provider, the items of its stream (or the error) and the requests sent."""
    provider, requests, sleeps = provider_with_replies(
        AnthropicProvider, *replies, api_key=KEY, **kwargs
    )
    return provider, collect(provider.stream(history, options=OPTIONS)), requests, sleeps


def calls_shown(items: list[Any]) -> list[tuple[str, str, str]]:
    return [(c["id"], c["name"], c["arguments"]) for c in shown(items).to_dict()["tool_calls"]]


def text_shown(items: list[Any]) -> tuple[str, str]:
    turn = shown(items)
    return turn.text, turn.reasoning


# Properties ---------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    answer=streamed_answers(),
    points=cut_points,
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    pings=st.lists(st.integers(0, 100), max_size=3),
)
def test_a_streamed_answer_is_the_whole_answer(
    answer: dict[str, Any], points: list[int], newline: str, pings: list[int]
) -> None:
    events = stream_events(answer)
    for position in pings:
        events.insert(1 + position % len(events), {"type": "ping"})
    provider, items, requests, _ = run(streamed(split_bytes(sse(events, newline), points)))

    final = items[-1]
    assert isinstance(final, CompletionResponse), final
    assert not any(isinstance(item, CompletionResponse) for item in items[:-1])
    expected = check_response(provider.parse_response(whole_body(answer)), provider="anthropic")
    assert final == expected
    assert text_shown(items) == (final.content, final.thinking or "")
    assert calls_shown(items) == [
        (call.id, call.name, call.arguments_json) for call in final.tool_calls or ()
    ]
    assert [call.id for call in final.tool_calls or ()] == [c["id"] for c in answer["calls"]]
    assert len(requests) == 1
    assert json.loads(requests[0].content)["stream"] is True


@settings(max_examples=30, deadline=None)
@given(answer=streamed_answers(max_calls=2), points=cut_points)
def test_a_reused_call_id_gets_one_fresh_id_shown_and_stored(
    answer: dict[str, Any], points: list[int]
) -> None:
    answer["calls"].insert(0, {"id": "toolu_old", "name": "add", "arguments": {}, "pieces": []})
    history = [
        ChatMessage.user("Add."),
        ChatMessage.assistant_tool_calls([ToolCall(id="toolu_old", name="add")]),
        ChatMessage.tool_result("toolu_old", "5"),
    ]
    _, items, _, _ = run(streamed(split_bytes(sse(stream_events(answer)), points)), history=history)
    final = items[-1]
    assert isinstance(final, CompletionResponse)
    shown = calls_shown(items)
    assert shown == [(call.id, call.name, call.arguments_json) for call in final.tool_calls or ()]
    assert shown[0][0] != "toolu_old"
    assert shown[0][2] == "{}"


def test_the_request_is_the_whole_request_asking_for_a_stream() -> None:
    answer = {"reasoning": [""], "signature": None, "text": ["5"], "calls": []}
    answer["usage"] = {"input": 1, "output": 1, "cached": 0}
    provider, items, requests, _ = run(streamed([sse(stream_events(answer))]))
    assert isinstance(items[-1], CompletionResponse)
    body = json.loads(requests[0].content)
    assert body == {**provider.build_payload(HISTORY, (), OPTIONS), "stream": True}
    assert str(requests[0].url) == "https://api.anthropic.com/v1/messages"
    assert requests[0].headers["x-api-key"] == KEY


# Input JSON -----------------------------------------------------------------------------


def _call_answer(pieces: list[str], arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    call = {"id": "toolu_1", "name": "add", "arguments": arguments or {}, "pieces": pieces}
    return {
        "reasoning": [""],
        "signature": None,
        "text": [""],
        "calls": [call],
        "usage": {"input": 3, "output": 4, "cached": 0},
    }


@pytest.mark.parametrize("text", ['{"a": ', "not json", "[1, 2]", '"x"', "{oops"])
def test_input_that_is_not_an_object_is_kept_as_parse_response_keeps_it(text: str) -> None:
    answer = _call_answer([text[:2], text[2:]])
    provider, items, _, _ = run(streamed([sse(stream_events(answer))]))
    final = items[-1]
    assert isinstance(final, CompletionResponse)
    body = whole_body(answer)
    body["content"][0]["input"] = json.loads(text) if text in ("[1, 2]", '"x"') else text
    assert final == provider.parse_response(body)
    call = final.tool_calls[0] if final.tool_calls else None
    assert call is not None and call.arguments == {} and call.raw_arguments is not None


def test_no_input_pieces_mean_empty_arguments() -> None:
    _, items, _, _ = run(streamed([sse(stream_events(_call_answer([])))]))
    final = items[-1]
    assert final.tool_calls == (ToolCall(id="toolu_1", name="add"),)
    assert calls_shown(items) == [("toolu_1", "add", "{}")]
    assert final.finish_reason == "tool_calls"


def test_redacted_thinking_and_unknown_events_pass_as_in_the_whole_body() -> None:
    answer = _call_answer(['{"a":1}'], {"a": 1})
    events = stream_events(answer)
    redacted = {"type": "redacted_thinking", "data": "opaque=="}
    events[1:1] = [
        {"type": "content_block_start", "index": 0, "content_block": redacted},
        {"type": "content_block_stop", "index": 0},
        {"type": "some_future_event", "index": 0},
    ]
    for event in events[4:]:
        if "index" in event:
            event["index"] += 1
    provider, items, _, _ = run(streamed([sse(events)]))
    body = whole_body(answer)
    body["content"].insert(0, redacted)
    assert items[-1] == provider.parse_response(body)
    assert items[-1].provider_metadata == {"anthropic": {"thinking_blocks": [redacted]}}


# Failures ---------------------------------------------------------------------------


def _text_answer() -> dict[str, Any]:
    return {
        "reasoning": [""],
        "signature": None,
        "text": ["Five", "."],
        "calls": [],
        "usage": {"input": 3, "output": 4, "cached": 0},
    }


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def test_an_error_event_after_a_delta_fails_the_stream_without_a_retry() -> None:
    events = [*stream_events(_text_answer())[:4], _error("overloaded_error", "Overloaded")]
    _, items, requests, _ = run(streamed([sse(events)]), max_retries=2)
    assert items[0] == TextDelta("Five")
    assert isinstance(items[-1], ProviderResponseError)
    assert "overloaded_error" in str(items[-1])
    assert len(requests) == 1


def test_an_error_event_before_any_delta_is_retried() -> None:
    failing = sse([*stream_events(_text_answer())[:1], _error("api_error", "Internal")])
    _, items, requests, sleeps = run(
        streamed([failing]), streamed([sse(stream_events(_text_answer()))]), max_retries=1
    )
    assert isinstance(items[-1], CompletionResponse)
    assert items[-1].content == "Five."
    assert len(requests) == 2 and len(sleeps) == 1


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("rate_limit_error", ProviderRateLimited),
        ("authentication_error", ProviderAuthenticationError),
        ("invalid_request_error", ProviderHTTPError),
        ("request_too_large", ProviderHTTPError),
        ("overloaded_error", ProviderResponseError),
        ("something_new", ProviderResponseError),
    ],
)
def test_error_events_map_to_the_error_tree_and_hide_the_key(
    kind: str, error: type[Exception]
) -> None:
    events = [*stream_events(_text_answer())[:4], _error(kind, f"bad key {KEY}")]
    _, items, _, _ = run(streamed([sse(events)]), max_retries=0)
    assert type(items[-1]) is error
    assert KEY not in str(items[-1])
    assert "[redacted]" in str(items[-1])
    if isinstance(items[-1], ProviderHTTPError):
        assert items[-1].status_code in (400, 413)
        assert KEY not in items[-1].body


def test_a_stream_broken_off_after_a_delta_is_not_retried() -> None:
    data = sse(stream_events(_text_answer())[:4])
    _, items, requests, _ = run(broken_stream([data]), max_retries=2)
    assert items[0] == TextDelta("Five")
    assert isinstance(items[-1], ProviderResponseError)
    assert "broke off" in str(items[-1])
    assert len(requests) == 1


def test_a_stream_broken_off_before_any_delta_is_retried() -> None:
    data = sse(stream_events(_text_answer())[:2])  # message_start and an empty text block
    _, items, requests, _ = run(
        broken_stream([data]), streamed([sse(stream_events(_text_answer()))]), max_retries=1
    )
    assert [type(item) for item in items] == [TextDelta, TextDelta, CompletionResponse]
    assert len(requests) == 2


def test_a_stream_without_message_stop_fails() -> None:
    data = sse(stream_events(_text_answer(), message_stop=False))
    _, items, requests, _ = run(streamed([data]), max_retries=2)
    assert isinstance(items[-1], ProviderResponseError)
    assert "message_stop" in str(items[-1])
    assert len(requests) == 1  # deltas were shown: no second attempt


@pytest.mark.parametrize(
    "record",
    [
        "event: content_block_delta\ndata: {not json\n\n",
        'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 7, '
        '"delta": {"type": "text_delta", "text": "x"}}\n\n',
        'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 1, '
        '"delta": {"type": "text_delta", "text": 5}}\n\n',
        "event: message_start\ndata: []\n\n",
        'event: content_block_stop\ndata: {"type": "content_block_stop", "index": -1}\n\n',
        'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
        '"content_block": {"type": "text", "text": ""}}\n\n',
    ],
)
def test_a_malformed_event_after_a_delta_fails_the_stream(record: str) -> None:
    data = sse(stream_events(_text_answer())[:4]) + record.encode()
    _, items, requests, _ = run(streamed([data]), max_retries=2)
    assert isinstance(items[-1], ProviderResponseError)
    assert "could not understand the stream" in str(items[-1])
    assert len(requests) == 1


def test_a_call_streams_its_id_and_name_first_then_the_pieces() -> None:
    _, items, _, _ = run(streamed([sse(stream_events(_call_answer(['{"a"', ":1}"])))]))
    assert items[:3] == [
        ToolCallDelta(0, "toolu_1", "add", ""),
        ToolCallDelta(0, None, None, '{"a"'),
        ToolCallDelta(0, None, None, ":1}"),
    ]
    assert items[-1].tool_calls == (ToolCall(id="toolu_1", name="add", arguments={"a": 1}),)


def test_a_nameless_call_is_dropped_as_in_the_whole_body_and_shows_nothing() -> None:
    answer = _call_answer(['{"a":1}'], {"a": 1})
    answer["calls"].insert(0, {"id": "toolu_0", "name": "", "arguments": {}, "pieces": ["{}"]})
    provider, items, _, _ = run(streamed([sse(stream_events(answer))]))
    assert items[-1] == provider.parse_response(whole_body(answer))
    assert calls_shown(items) == [("toolu_1", "add", '{"a":1}')]


def test_text_in_the_start_block_and_citations_are_kept() -> None:
    citation = {"type": "char_location", "cited_text": "5", "document_index": 0}
    events = stream_events(_text_answer())
    events[1]["content_block"] = {"type": "text", "text": "It is "}
    events.insert(3, {"type": "content_block_delta", "index": 0, "delta": {}})
    events.insert(
        3,
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "citations_delta", "citation": citation},
        },
    )
    provider, items, _, _ = run(streamed([sse(events)]))
    body = whole_body(_text_answer())
    body["content"] = [{"type": "text", "text": "It is Five.", "citations": [citation]}]
    assert items == [TextDelta("It is "), TextDelta("Five"), TextDelta("."), items[-1]]
    assert items[-1] == provider.parse_response(body)
