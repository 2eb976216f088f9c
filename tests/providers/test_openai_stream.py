"""OpenAI Chat Completions streams (every preset): the same answer whole and streamed agree.

Each generated answer is rendered twice in the vendor's shape, as the whole
body and as its ``chat.completion.chunk`` Server-Sent Events, and the stream's
bytes are cut anywhere; the streamed answer must equal the whole one.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    TextDelta,
    ToolCall,
    ToolCallDelta,
)
from conversations.exceptions import ProviderResponseError
from conversations.providers.base import CompletionOptions
from conversations.providers.openai import PRESETS, OpenAIProvider
from tests.strategies import Answer, answers, byte_cuts, pieces

from .mock_http import Recorder, cut, streamed
from .stream_checks import check_stream

KEY = "sk-test-0123456789abcdef"
OPTIONS = CompletionOptions(model="gpt-4o-mini")
MESSAGES = [ChatMessage.user("Hi")]


def adapter(recorder: Recorder, preset: str = "openai", **kwargs: Any) -> OpenAIProvider:
    return OpenAIProvider(
        api_key=KEY,
        base_url="https://llm.example.test/v1",
        preset=preset,
        http_client=recorder.client,
        sleep=lambda seconds: None,
        **kwargs,
    )


def whole_body(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.reasoning:
        message["reasoning_content"] = answer.reasoning
    if answer.calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in answer.calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": answer.model,
        "choices": [{"index": 0, "message": message, "finish_reason": answer.finish_reason}],
        "usage": usage(answer),
    }


def usage(answer: Answer) -> dict[str, int]:
    total = answer.prompt_tokens + answer.completion_tokens
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": total,
    }


def stream_deltas(draw: st.DrawFn, answer: Answer) -> list[dict[str, Any]]:
    """The deltas of the answer: role, reasoning and text pieces, then the calls' pieces.

    Argument pieces of parallel calls interleave, but each call starts (with its
    id and name) after the calls of lower index, as the service sends them.
    """
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"reasoning_content": p} for p in draw(pieces(answer.reasoning))]
    deltas += [{"content": p} for p in draw(pieces(answer.text))]
    queues = []
    for index, call in enumerate(answer.calls):
        first, *rest = draw(pieces(call.arguments))
        header = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": first},
        }
        queues.append([header, *({"index": index, "function": {"arguments": p}} for p in rest)])
    started = 0
    while any(queues):
        ready = [i for i in range(started) if queues[i]]
        if started < len(queues):
            ready.append(started)
        pick = draw(st.sampled_from(ready))
        started += pick == started
        deltas.append({"tool_calls": [queues[pick].pop(0)]})
    return deltas


@st.composite
def sse_streams(draw: st.DrawFn, answer: Answer, *, usage_chunk: bool) -> bytes:
    """The answer as the service streams it, as bytes (line ends and comments vary)."""
    nulls = draw(st.booleans())  # with include_usage, every other chunk says "usage": null

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1}
        body |= {"model": answer.model, "choices": choices}
        if nulls:
            body["usage"] = None
        return body | extra

    def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    chunks = []
    if draw(st.booleans()):  # Azure's first chunk: content filter results, no choices
        chunks.append(chunk([], prompt_filter_results=[{"prompt_index": 0}]))
    chunks += [chunk([choice(delta)]) for delta in stream_deltas(draw, answer)]
    if usage_chunk:
        chunks.append(chunk([choice({}, answer.finish_reason)]))
        chunks.append(chunk([], usage=usage(answer)))
    else:  # Mistral: the usage rides on the last choice chunk
        chunks.append(chunk([choice({}, answer.finish_reason)], usage=usage(answer)))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    records = [f"data: {json.dumps(c, ensure_ascii=draw(st.booleans()))}" for c in chunks]
    records.append("data: [DONE]")
    if draw(st.booleans()):
        records.insert(draw(st.integers(0, len(records))), ": keep-alive")
    return "".join(record + end + end for record in records).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers(), preset=st.sampled_from(sorted(PRESETS)), data=st.data())
def test_a_streamed_answer_equals_the_same_answer_sent_whole(answer, preset, data):
    provider = adapter(Recorder(httpx.Response(200, json=whole_body(answer))), preset)
    usage_chunk = provider.asks_stream_usage()
    raw = data.draw(sse_streams(answer, usage_chunk=usage_chunk))
    stream = Recorder(streamed(cut(raw, data.draw(byte_cuts))), strict=True)
    events = list(adapter(stream, preset).stream(MESSAGES, options=OPTIONS))
    whole = provider.complete(MESSAGES, options=OPTIONS)
    turn = check_stream(events, whole)
    # The argument pieces are the text the service sent, untouched.
    assert [turn.calls[i]["arguments"] for i in range(len(answer.calls))] == [
        call.arguments for call in answer.calls
    ]
    body = stream.bodies[0]
    assert body["stream"] is True
    assert ("stream_options" in body) == usage_chunk


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers(max_calls=2), data=st.data())
def test_a_stream_cut_short_is_retried_or_an_error_never_another_answer(answer, data):
    whole = adapter(Recorder(httpx.Response(200, json=whole_body(answer)))).complete(
        MESSAGES, options=OPTIONS
    )
    raw = data.draw(sse_streams(answer, usage_chunk=True))
    end = data.draw(st.integers(0, len(raw) - 1))
    fail = data.draw(st.sampled_from([None, httpx.ReadError("reset")]))
    short = streamed(cut(raw[:end], data.draw(byte_cuts)), fail=fail)
    recorder = Recorder(short, streamed([raw]), strict=True)
    events: list[Any] = []
    try:
        events.extend(adapter(recorder, max_retries=1).stream(MESSAGES, options=OPTIONS))
    except ProviderResponseError:
        # Only once something was shown: before that, the request is sent again.
        assert events and not any(isinstance(e, CompletionResponse) for e in events)
        assert len(recorder.requests) == 1
    else:
        # Retried before anything was shown, or only the last line break was missing.
        check_stream(events, whole)


def test_stream_payload_is_the_whole_payload_asking_for_a_stream_and_its_usage():
    provider = adapter(Recorder(httpx.Response(200)))
    whole = provider.build_payload(MESSAGES, (), OPTIONS)
    streamed_body = provider.build_stream_payload(MESSAGES, (), OPTIONS)
    assert streamed_body == {**whole, "stream": True, "stream_options": {"include_usage": True}}


@pytest.mark.parametrize(
    ("preset", "api_version", "asks"),
    [
        ("openai", None, True),
        ("groq", None, True),
        ("openrouter", None, True),
        ("mistral", None, False),  # HTTP 422 "extra inputs are not permitted"
        ("azure_openai", None, True),  # the default version takes it
        ("azure_openai", "2024-09-01-preview", True),
        ("azure_openai", "2024-06-01", False),  # "Unknown parameter: 'stream_options'"
    ],
)
def test_stream_options_are_sent_where_the_service_takes_them(preset, api_version, asks):
    extra = {} if api_version is None else {"api_version": api_version}
    provider = adapter(Recorder(httpx.Response(200)), preset, **extra)
    body = provider.build_stream_payload(MESSAGES, (), OPTIONS)
    assert body["stream"] is True
    assert ("stream_options" in body) is asks


def test_extra_options_cannot_turn_the_stream_off_but_may_set_stream_options():
    provider = adapter(Recorder(httpx.Response(200)))
    options = CompletionOptions(
        model="m", extra={"stream": False, "stream_options": {"include_usage": False}}
    )
    body = provider.build_stream_payload(MESSAGES, (), options)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": False}


def sse(*chunks: Any, done: bool = True) -> bytes:
    records = [c if isinstance(c, str) else json.dumps(c) for c in chunks]
    if done:
        records.append("[DONE]")
    return "".join(f"data: {record}\n\n" for record in records).encode()


def delta_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    } | extra


def play(raw: bytes, known: tuple[str, ...] = (), **kwargs: Any) -> list[Any]:
    recorder = Recorder(streamed([raw]), strict=True)
    messages = list(MESSAGES)
    if known:
        messages.append(ChatMessage.assistant_tool_calls([ToolCall(id=i, name="f") for i in known]))
        messages += [ChatMessage.tool_result(i, "ok") for i in known]
    return list(adapter(recorder, **kwargs).stream(messages, options=OPTIONS))


def test_missing_and_reused_ids_get_fresh_ones_that_the_deltas_already_use():
    raw = sse(
        delta_chunk({"tool_calls": [{"index": 0, "function": {"name": "a", "arguments": "{}"}}]}),
        delta_chunk({"tool_calls": [{"index": 1, "id": "dup", "function": {"name": "b"}}]}),
        delta_chunk({"tool_calls": [{"index": 2, "id": "x", "function": {"name": "c"}}]}),
        delta_chunk({"tool_calls": [{"index": 3, "id": "x", "function": {"name": "d"}}]}),
        delta_chunk({}, "tool_calls"),
    )
    events = play(raw, known=("dup",))
    final = events[-1]
    ids = [call.id for call in final.tool_calls]
    shown = [e.id for e in events if isinstance(e, ToolCallDelta) and e.id is not None]
    assert shown == ids
    assert len(set(ids)) == 4 and "dup" not in ids and ids[2] == "x"


def test_a_call_without_a_name_is_never_shown_and_takes_no_position(caplog):
    raw = sse(
        delta_chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"arguments": "{}"}}]}),
        delta_chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "f"}}]}),
        delta_chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"x": 1}'}}]}),
        delta_chunk({}, "tool_calls"),
    )
    with caplog.at_level(logging.WARNING, logger="conversations.providers"):
        events = play(raw)
    assert [e for e in events[:-1] if isinstance(e, ToolCallDelta)] == [
        ToolCallDelta(0, "b", "f", ""),
        ToolCallDelta(0, None, None, '{"x": 1}'),
    ]
    assert [(c.id, dict(c.arguments)) for c in events[-1].tool_calls] == [("b", {"x": 1})]
    assert "without a name" in caplog.text


def test_pieces_without_an_index_continue_the_call_until_a_new_id_arrives():
    raw = sse(
        delta_chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}),
        delta_chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
        delta_chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
        delta_chunk({}, "tool_calls"),
    )
    final = play(raw)[-1]
    assert [(c.id, c.name) for c in final.tool_calls] == [("a", "f"), ("b", "g")]


def test_a_refusal_is_the_text_and_shown_as_text():
    raw = sse(delta_chunk({"refusal": "I can't "}), delta_chunk({"refusal": "help."}, "stop"))
    events = play(raw)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["I can't ", "help."]
    assert events[-1].content == "I can't help."


def test_reasoning_sent_under_both_keys_is_shown_once():
    raw = sse(
        delta_chunk({"reasoning_content": "Think", "reasoning": "Think"}),
        delta_chunk({"reasoning_content": "ing.", "reasoning": "ing."}),
        delta_chunk({"content": "Done."}, "stop"),
    )
    events = play(raw)
    check_stream(events, events[-1])
    assert events[-1].thinking == "Thinking."


def test_content_parts_are_joined_as_text():
    raw = sse(delta_chunk({"content": [{"type": "text", "text": "Hi"}, {"type": "other"}]}, "stop"))
    assert play(raw)[-1].content == "Hi"


def test_other_choices_are_ignored():
    other = {"model": "m", "choices": [{"index": 1, "delta": {"content": "no"}}]}
    raw = sse(other, delta_chunk({"content": "yes"}, "stop"))
    assert play(raw)[-1].content == "yes"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (sse(delta_chunk({"content": "Hi"})), "without a finish_reason"),
        (sse(delta_chunk({"content": "Hi"}, "stop"), done=False), "without [DONE]"),
        (sse(delta_chunk({"content": "Hi"}), {"error": {"message": "overloaded"}}), "overloaded"),
        (sse(delta_chunk({"content": "Hi"}), "[1, 2]"), "not an object"),
        (sse(delta_chunk({"content": "Hi"}), "{oops"), "could not understand"),
        (sse(delta_chunk({"content": 5})), "could not understand"),
        (sse(delta_chunk({"tool_calls": [{"index": "0"}]})), "could not understand"),
    ],
)
def test_a_broken_stream_is_a_bad_response(raw, message):
    with pytest.raises(ProviderResponseError, match=message.replace("[", r"\[")):
        play(raw, max_retries=0)


def test_an_error_record_never_shows_the_key():
    raw = sse({"error": {"message": f"bad key {KEY}"}})
    with pytest.raises(ProviderResponseError) as info:
        play(raw, max_retries=0)
    assert KEY not in str(info.value)


def test_records_after_done_are_ignored():
    raw = sse(delta_chunk({"content": "Hi"}, "stop")) + b"data: {oops\n\n"
    assert play(raw)[-1] == CompletionResponse(
        content="Hi", model="m", finish_reason="stop", provider="openai"
    )
