"""The shared streaming transport: decoding byte chunks, SSE records, retries, bounds, closing."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conversations.domain import ChatMessage, CompletionResponse, TextDelta
from conversations.exceptions import (
    ProviderAuthenticationError,
    ProviderConnectionError,
    ProviderInvalidResponse,
    ProviderRateLimited,
    ProviderResponseError,
)
from conversations.providers.base import CompletionOptions
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import OpenAIProvider
from conversations.providers.streaming import iter_lines, ndjson_records, sse_records
from tests.strategies import answer_text, byte_cuts

from .mock_http import ChunkStream, Recorder, cut, streamed

KEY = "sk-test-0123456789abcdef"
OPTIONS = CompletionOptions(model="gpt-4o-mini")
MESSAGES = [ChatMessage.user("Hi")]


# Decoding --------------------------------------------------------------------------


def test_a_crlf_split_across_chunks_is_one_line_break():
    assert list(iter_lines([b"one\r", b"\ntwo\r", b"\r\nthree"])) == ["one", "two", "", "three"]


def test_a_lone_cr_at_the_end_is_a_line_break():
    assert list(iter_lines([b"one\r"])) == ["one"]
    assert list(iter_lines([b"a\rb\nc"])) == ["a", "b", "c"]


def test_a_character_split_across_chunks_is_reassembled():
    data = "Grüße 🌍\n".encode()
    assert list(iter_lines([data[:3], data[3:4], data[4:11], data[11:]])) == ["Grüße 🌍"]


def test_invalid_utf8_is_a_decode_error():
    with pytest.raises(UnicodeDecodeError):
        list(iter_lines([b"ok\n", b"\xff\xfe\n"]))
    with pytest.raises(UnicodeDecodeError):
        list(iter_lines(["é".encode()[:1]]))  # cut off in the middle of a character


def test_other_unicode_line_separators_stay_inside_the_line():
    # JSON may carry U+2028 and U+0085 unescaped; only CR and LF end a line.
    assert list(iter_lines(["a\u2028b\x85c\n".encode()])) == ["a\u2028b\x85c"]


@given(
    lines=st.lists(answer_text.filter(lambda t: "\r" not in t and "\n" not in t)), cuts=byte_cuts
)
def test_lines_survive_any_cut(lines, cuts):
    data = "".join(line + "\r\n" for line in lines).encode()
    assert list(iter_lines(cut(data, cuts))) == lines


def test_sse_skips_comments_and_joins_data_lines():
    lines = [": keep-alive", "event: update", "data: one", "data:two", "id: 7", "", ""]
    assert list(sse_records(lines)) == [("update", "one\ntwo")]


def test_sse_delivers_an_event_without_the_final_blank_line():
    assert list(sse_records(["data: a", "", "data: b"])) == [("message", "a"), ("message", "b")]


def test_sse_ignores_records_without_data():
    assert list(sse_records(["event: ping", "", "retry: 5", ""])) == []


def test_ndjson_skips_blank_lines():
    assert list(ndjson_records(["{}", " ", "", "[]"])) == [("", "{}"), ("", "[]")]


# The transport ----------------------------------------------------------------------


def chunk(content: str | None = None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    body = {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


ROLE = f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'role': 'assistant'}}]})}\n\n"
GOOD = [chunk("Hel"), chunk("lo"), chunk(finish="stop"), b"data: [DONE]\n\n"]


def openai(*replies: Any, **kwargs: Any) -> tuple[OpenAIProvider, Recorder, list[float]]:
    recorder = Recorder(*replies, strict=True)
    sleeps: list[float] = []
    provider = OpenAIProvider(
        api_key=KEY, http_client=recorder.client, sleep=sleeps.append, **kwargs
    )
    return provider, recorder, sleeps


def texts(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


def test_a_stream_yields_deltas_then_the_response():
    provider, recorder, _ = openai(streamed(GOOD))
    events = list(provider.stream(MESSAGES, options=OPTIONS))
    assert texts(events) == ["Hel", "lo"]
    assert events[-1] == CompletionResponse(
        content="Hello", model="m", finish_reason="stop", provider="openai"
    )
    assert recorder.requests[0].url == "https://api.openai.com/v1/chat/completions"


def test_a_break_after_a_delta_is_a_bad_response_and_not_retried():
    provider, recorder, sleeps = openai(streamed(GOOD[:1], fail=httpx.ReadError("reset")))
    seen: list[Any] = []
    with pytest.raises(ProviderResponseError, match="broke off"):
        for event in provider.stream(MESSAGES, options=OPTIONS):
            seen.append(event)
    assert texts(seen) == ["Hel"]
    assert len(recorder.requests) == 1 and sleeps == []


def test_a_break_before_any_delta_is_retried():
    broken = streamed([ROLE.encode()], fail=httpx.ReadError("reset"))
    provider, recorder, sleeps = openai(broken, streamed(GOOD))
    events = list(provider.stream(MESSAGES, options=OPTIONS))
    assert events[-1].content == "Hello"
    assert texts(events) == ["Hel", "lo"]  # nothing of the broken attempt was shown
    assert len(recorder.requests) == 2 and len(sleeps) == 1


def test_a_connection_failure_before_the_stream_is_retried_then_reported():
    failure = httpx.ConnectError("refused")
    provider, recorder, sleeps = openai(failure, failure, max_retries=1)
    with pytest.raises(ProviderConnectionError):
        list(provider.stream(MESSAGES, options=OPTIONS))
    assert len(recorder.requests) == 2 and len(sleeps) == 1


def test_a_malformed_chunk_before_any_delta_is_retried():
    provider, recorder, _ = openai(streamed([b"data: {oops\n\n"]), streamed(GOOD))
    assert list(provider.stream(MESSAGES, options=OPTIONS))[-1].content == "Hello"
    assert len(recorder.requests) == 2


def test_a_malformed_chunk_after_a_delta_is_a_bad_response():
    provider, recorder, _ = openai(streamed([GOOD[0], b"data: {oops\n\n"]))
    with pytest.raises(ProviderResponseError, match="could not understand the stream"):
        list(provider.stream(MESSAGES, options=OPTIONS))
    assert len(recorder.requests) == 1


def test_a_stream_without_its_end_is_a_bad_response():
    provider, _, _ = openai(streamed(GOOD[:2]))
    with pytest.raises(ProviderResponseError, match="incomplete"):
        list(provider.stream(MESSAGES, options=OPTIONS))


@pytest.mark.parametrize(("status", "headers"), [(429, {"retry-after": "1"}), (500, {}), (503, {})])
def test_a_refusal_before_the_stream_is_retried(status, headers):
    refused = httpx.Response(status, headers=headers, json={"error": {"message": "busy"}})
    provider, recorder, sleeps = openai(refused, streamed(GOOD))
    assert list(provider.stream(MESSAGES, options=OPTIONS))[-1].content == "Hello"
    assert len(recorder.requests) == 2
    assert len(sleeps) == 1
    if headers:
        assert sleeps == [1.0]  # the service's Retry-After


def test_rate_limits_on_every_attempt_are_reported():
    limited = httpx.Response(429, json={"error": {"message": "slow down"}})
    provider, _, sleeps = openai(limited, limited, max_retries=1)
    with pytest.raises(ProviderRateLimited):
        list(provider.stream(MESSAGES, options=OPTIONS))
    assert len(sleeps) == 1


def test_an_authentication_failure_is_raised_at_once_without_the_key():
    denied = httpx.Response(401, json={"error": {"message": f"bad key {KEY}"}})
    provider, recorder, sleeps = openai(denied)
    with pytest.raises(ProviderAuthenticationError) as info:
        list(provider.stream(MESSAGES, options=OPTIONS))
    assert KEY not in str(info.value)
    assert len(recorder.requests) == 1 and sleeps == []


def test_a_stream_larger_than_the_bound_is_refused():
    many = [chunk("x" * 100)] * 50 + GOOD
    provider, recorder, _ = openai(streamed(many), max_response_bytes=2000)
    with pytest.raises(ProviderInvalidResponse, match="larger than 2000 bytes"):
        list(provider.stream(MESSAGES, options=OPTIONS))
    assert len(recorder.requests) == 1


def test_closing_the_stream_closes_the_response():
    bodies: list[ChunkStream] = []
    provider, _, _ = openai(streamed(GOOD, streams=bodies))
    events = provider.stream(MESSAGES, options=OPTIONS)
    assert next(iter(events)) == TextDelta("Hel")
    assert not bodies[0].closed
    events.close()  # type: ignore[attr-defined]
    assert bodies[0].closed
    assert bodies[0].sent < len(GOOD)


def test_the_ndjson_adapter_shares_the_transport():
    line = {"model": "q", "message": {"role": "assistant", "content": "Hi"}, "done": False}
    done = {"model": "q", "message": {"content": ""}, "done": True, "done_reason": "stop"}
    data = (json.dumps(line) + "\n" + json.dumps(done) + "\n").encode()
    recorder = Recorder(httpx.Response(500), streamed(cut(data, [5, 40, 41])), strict=True)
    sleeps: list[float] = []
    provider = OllamaProvider(http_client=recorder.client, sleep=sleeps.append)
    events = list(provider.stream(MESSAGES, options=CompletionOptions(model="q")))
    assert texts(events) == ["Hi"] and events[-1].content == "Hi"
    assert recorder.requests[-1].url == "http://localhost:11434/api/chat"
    assert len(sleeps) == 1
