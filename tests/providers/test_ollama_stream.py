"""Ollama ``/api/chat`` streams: NDJSON lines cut anywhere give the same answer as ``stream: false``."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.domain import ChatMessage, CompletionResponse, ToolCall, ToolCallDelta
from conversations.exceptions import ProviderResponseError
from conversations.providers.base import CompletionOptions
from conversations.providers.ollama import OllamaProvider
from tests.strategies import Answer, answers, byte_cuts, pieces

from .mock_http import Recorder, cut, streamed
from .stream_checks import check_stream
from .wire_ollama import validate_ollama_request

OPTIONS = CompletionOptions(model="qwen3")
MESSAGES = [ChatMessage.user("Hi")]
STAMP = "2026-08-22T14:05:00Z"


def adapter(recorder: Recorder, **kwargs: Any) -> OllamaProvider:
    return OllamaProvider(http_client=recorder.client, sleep=lambda seconds: None, **kwargs)


def wire_calls(answer: Answer, with_ids: bool = True) -> list[dict[str, Any]]:
    return [
        {
            **({"id": call.id} if with_ids else {}),
            "function": {"index": index, "name": call.name, "arguments": call.value},
        }
        for index, call in enumerate(answer.calls)
    ]


def final_fields(answer: Answer) -> dict[str, Any]:
    return {
        "done": True,
        "done_reason": "length" if answer.finish_reason == "length" else "stop",
        "total_duration": 1234,
        "prompt_eval_count": answer.prompt_tokens,
        "eval_count": answer.completion_tokens,
    }


def whole_body(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.reasoning:
        message["thinking"] = answer.reasoning
    if answer.calls:
        message["tool_calls"] = wire_calls(answer)
    return {"model": answer.model, "created_at": STAMP, "message": message, **final_fields(answer)}


@st.composite
def ndjson_streams(draw: st.DrawFn, answer: Answer) -> bytes:
    """The answer as Ollama streams it: thinking and text pieces, calls in groups, the done line."""

    def line(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
        base = {"model": answer.model, "created_at": STAMP}
        return (
            base
            | {"message": {"role": "assistant", "content": ""} | message, "done": False}
            | extra
        )

    lines = [line({"thinking": p}) for p in draw(pieces(answer.reasoning))]
    lines += [line({"content": p}) for p in draw(pieces(answer.text))]
    calls = wire_calls(answer)
    while calls:  # Ollama sends whole calls, one or several per line
        size = draw(st.integers(1, len(calls)))
        lines.append(line({"tool_calls": calls[:size]}))
        calls = calls[size:]
    lines.append(line({}, **final_fields(answer)))
    text = "".join(json.dumps(x, ensure_ascii=draw(st.booleans())) + "\n" for x in lines)
    return text.encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers(raw=False), data=st.data())
def test_a_streamed_answer_equals_the_same_answer_sent_whole(answer, data):
    whole = adapter(Recorder(httpx.Response(200, json=whole_body(answer)))).complete(
        MESSAGES, options=OPTIONS
    )
    raw = data.draw(ndjson_streams(answer))
    recorder = Recorder(streamed(cut(raw, data.draw(byte_cuts))), strict=True)
    events = list(adapter(recorder).stream(MESSAGES, options=OPTIONS))
    check_stream(events, whole)
    assert recorder.bodies[0]["stream"] is True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers(raw=False, max_calls=2), data=st.data())
def test_a_stream_cut_short_is_retried_or_an_error_never_another_answer(answer, data):
    whole = adapter(Recorder(httpx.Response(200, json=whole_body(answer)))).complete(
        MESSAGES, options=OPTIONS
    )
    raw = data.draw(ndjson_streams(answer))
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


def test_the_stream_payload_is_the_whole_one_with_stream_true():
    provider = OllamaProvider()
    whole = provider.build_payload(MESSAGES, (), OPTIONS)
    assert whole["stream"] is False
    assert validate_ollama_request(whole) == []
    extra = CompletionOptions(model="qwen3", extra={"stream": False})
    assert provider.build_stream_payload(MESSAGES, (), extra) == {**whole, "stream": True}


def play(raw: bytes, **kwargs: Any) -> list[Any]:
    recorder = Recorder(streamed([raw]), strict=True)
    return list(adapter(recorder, **kwargs).stream(MESSAGES, options=OPTIONS))


def ndjson(*lines: dict[str, Any]) -> bytes:
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


DONE = {"model": "qwen3", "message": {"role": "assistant", "content": ""}, "done": True}


def test_calls_without_ids_get_fresh_ones_that_the_deltas_already_use():
    call = {"function": {"name": "f", "arguments": {"x": 1}}}
    raw = ndjson({"message": {"tool_calls": [call, call]}, "done": False}, DONE)
    events = play(raw)
    final = events[-1]
    assert [e.id for e in events[:-1] if isinstance(e, ToolCallDelta)] == [
        c.id for c in final.tool_calls
    ]
    assert len({c.id for c in final.tool_calls}) == 2
    assert final.finish_reason == "tool_calls"


def test_a_call_without_a_name_is_not_shown():
    calls = [{"id": "a", "function": {"arguments": {}}}, {"id": "b", "function": {"name": "f"}}]
    events = play(ndjson({"message": {"tool_calls": calls}, "done": False}, DONE))
    assert events[:-1] == [ToolCallDelta(0, "b", "f", "{}")]
    assert events[-1].tool_calls == (ToolCall(id="b", name="f"),)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (ndjson({"message": {"content": "Hi"}, "done": False}), "without its done line"),
        (ndjson({"message": {"content": "Hi"}}, {"error": "model unloaded"}), "model unloaded"),
        (ndjson({"message": {"content": "Hi"}}) + b"{oops\n", "could not understand"),
        (ndjson({"message": {"content": "Hi"}}) + b"[1]\n", "not an object"),
        (ndjson({"message": {"content": 5}}), "could not understand"),
        (ndjson({"message": "Hi"}), "could not understand"),
    ],
)
def test_a_broken_stream_is_a_bad_response(raw, message):
    with pytest.raises(ProviderResponseError, match=message):
        play(raw, max_retries=0)


def test_lines_after_the_done_line_are_ignored():
    raw = ndjson({"message": {"content": "Hi"}, "done": False}, DONE) + b"{oops\n"
    assert play(raw)[-1].content == "Hi"
