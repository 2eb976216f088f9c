"""Streamed answers over real HTTP: deadlines that a drip cannot hold open, whole JSON answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conversations.domain import ChatMessage, CompletionResponse, TextDelta
from conversations.exceptions import InvalidArgumentError, ProviderResponseError, ProviderTimeout
from conversations.providers.base import CompletionOptions, HTTPProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.streaming import iter_lines, ndjson_records, sse_records
from tests.fake_provider import WIRES, FakeAnswer, FakeProviderServer, paced

OPTIONS = CompletionOptions(model="fake-model")
HELLO = [ChatMessage.user("Hello")]
ADAPTERS = sorted(WIRES)


def adapter(name: str, server: FakeProviderServer, **kwargs: Any) -> HTTPProvider:
    kwargs.setdefault("sleep", lambda seconds: None)
    return WIRES[name].connect(server, **kwargs)


def streamed(name: str, *pieces: bytes, every: float, then: bytes = b"") -> FakeAnswer:
    # Ten seconds of keep-alives at most: without a deadline the test fails, it does not hang.
    body = paced(pieces, every=every, then=then, for_seconds=10 if then else 0)
    return FakeAnswer(b"", content_type=WIRES[name].content_type, pieces=body)


def drain(provider: HTTPProvider) -> tuple[list[Any], BaseException | None]:
    """What the stream yielded, and the error that ended it (``None``: it completed)."""
    shown: list[Any] = []
    try:
        for event in provider.stream(HELLO, options=OPTIONS):
            shown.append(event)
    except (ProviderTimeout, ProviderResponseError) as exc:
        return shown, exc
    finally:
        provider.close()
    return shown, None


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_stream_of_keep_alives_only_is_cut_after_the_timeout(name):
    wire = WIRES[name]
    answer = streamed(name, wire.start, every=0.05, then=wire.keep_alive)
    with FakeProviderServer(answer) as server:
        shown, error = drain(adapter(name, server, timeout=0.5, max_retries=2))
    assert isinstance(error, ProviderTimeout) and error.code == "provider_timeout"
    assert shown == []
    # The idle bound before the first event is the exchange's deadline: no retry after it.
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_stream_dripping_a_byte_at_a_time_is_cut_after_the_timeout(name):
    body = b"".join(WIRES[name].stream("x" * 100))
    answer = FakeAnswer(
        body, content_type=WIRES[name].content_type, drip_seconds=0.05, declare_length=False
    )
    with FakeProviderServer(answer) as server:
        shown, error = drain(adapter(name, server, timeout=0.5, max_retries=2))
    assert isinstance(error, ProviderTimeout)
    assert not any(isinstance(event, CompletionResponse) for event in shown)
    assert len(server.requests) == 1
    assert server.bytes_sent < len(body)


@pytest.mark.parametrize("name", ADAPTERS)
def test_keep_alives_after_some_text_do_not_hold_the_stream_open(name):
    wire = WIRES[name]
    answer = streamed(name, wire.start, wire.delta("Hello "), every=0.05, then=wire.keep_alive)
    with FakeProviderServer(answer) as server:
        # The idle bound leaves time for "Hello " to arrive on a busy machine: a
        # stream that shows nothing before it passes is retried instead.
        shown, error = drain(adapter(name, server, timeout=2, max_retries=2))
    assert isinstance(error, ProviderTimeout)
    assert shown == [TextDelta("Hello ")]
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_stream_that_keeps_sending_text_is_cut_at_max_stream_seconds(name):
    wire = WIRES[name]
    # Text every 50 ms for ten seconds: the idle bound never passes, the total one does.
    # The total bound leaves time for the first pieces to arrive on a busy machine
    # (at half a second, one run in dozens under a load of 12 had shown nothing yet).
    answer = streamed(name, wire.start, every=0.05, then=wire.delta("more "))
    with FakeProviderServer(answer) as server:
        provider = adapter(name, server, timeout=5, max_retries=2, max_stream_seconds=2.5)
        shown, error = drain(provider)
    assert isinstance(error, ProviderTimeout) and "2.5 s" in str(error)
    assert shown and all(event == TextDelta("more ") for event in shown)
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_stream_within_its_bounds_completes(name):
    wire = WIRES[name]
    answer = streamed(name, *wire.stream("Hel", "lo"), every=0.01)
    with FakeProviderServer(answer) as server:
        shown, error = drain(adapter(name, server, timeout=5, max_stream_seconds=5))
    assert error is None
    assert shown[:-1] == [TextDelta("Hel"), TextDelta("lo")]
    assert isinstance(shown[-1], CompletionResponse) and shown[-1].content == "Hello"


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_whole_json_answer_to_a_streamed_request_is_understood(name):
    # Pretty-printed, as some servers send it: not one NDJSON line either.
    body = json.dumps(WIRES[name].whole("Hello there"), indent=2).encode()
    with FakeProviderServer(FakeAnswer(body)) as server:
        shown, error = drain(adapter(name, server, timeout=5))
    assert error is None
    # Watchers get the text as one delta, then the answer.
    assert shown[:-1] == [TextDelta("Hello there")]
    final = shown[-1]
    assert isinstance(final, CompletionResponse) and final.content == "Hello there"
    assert final.usage.prompt_tokens == 3 and not final.usage.estimated
    assert server.requests[0]["body"].get("stream", True) is not False


def test_a_json_array_of_gemini_chunks_is_understood_as_the_whole_answer():
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}]
    chunks.append(WIRES["gemini"].whole("lo"))
    with FakeProviderServer(FakeAnswer.json(chunks)) as server:
        shown, error = drain(adapter("gemini", server, timeout=5))
    assert error is None
    assert shown[:-1] == [TextDelta("Hello")]
    assert shown[-1].content == "Hello"


@pytest.mark.parametrize("name", ADAPTERS)
@pytest.mark.parametrize("body", [b"not json at all", b'"a string"', b'{"unexpected": true}'])
def test_a_json_answer_that_is_no_answer_is_a_bad_response(name, body):
    with FakeProviderServer(FakeAnswer(body)) as server:
        shown, error = drain(adapter(name, server, timeout=5, max_retries=0))
    assert isinstance(error, ProviderResponseError) and error.code == "provider_bad_response"
    assert shown == []


def test_a_body_that_is_neither_stream_nor_json_is_a_bad_response():
    answer = FakeAnswer(b"<html>busy</html>", content_type="text/html")
    with FakeProviderServer(answer) as server:
        shown, error = drain(adapter("openai_compatible", server, timeout=5, max_retries=0))
    assert isinstance(error, ProviderResponseError) and error.code == "provider_bad_response"
    assert shown == []


@pytest.mark.parametrize("value", [0, -1, float("inf"), "600", True])
def test_max_stream_seconds_must_be_a_positive_number(value):
    with pytest.raises(InvalidArgumentError) as raised:
        OllamaProvider(max_stream_seconds=value)
    assert raised.value.field == "max_stream_seconds"


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_silent_stream_is_cut_at_its_bound_while_a_read_waits(name):
    wire = WIRES[name]
    # One record, then ten seconds of silence: a read blocks well past the total bound,
    # and only shutting the socket down ends it on time (the read timeout is 5 s). The
    # bound leaves the record time to arrive on a busy machine.
    answer = FakeAnswer(
        b"", content_type=wire.content_type, pieces=paced([wire.start + wire.delta("Hi")], every=10)
    )
    with FakeProviderServer(answer) as server:
        provider = adapter(name, server, timeout=5, max_retries=0, max_stream_seconds=2)
        shown, error = drain(provider)
    assert isinstance(error, ProviderTimeout) and "past 2 s" in str(error)
    assert shown == [TextDelta("Hi")]


def fed(name: str, parser: Any, data: bytes) -> list[tuple[object, object, list[Any]]]:
    """Each record of ``data``: the parser's progress before and after it, and its deltas."""
    reader = ndjson_records if WIRES[name].adapter.stream_format == "ndjson" else sse_records
    seen = []
    for event, text in reader(iter_lines([data])):
        before = parser.progress()
        deltas = list(parser.feed(event, text))
        seen.append((before, parser.progress(), deltas))
    return seen


@pytest.mark.parametrize("name", ADAPTERS)
def test_a_finish_or_usage_record_is_news_and_a_keep_alive_is_not(name):
    wire = WIRES[name]
    extra = {"preset": "openai_compatible"} if name == "openai_compatible" else {}
    adapter = wire.adapter(api_key="sk-test", base_url="http://127.0.0.1:9", **extra)
    parser = adapter.stream_parser()
    fed(name, parser, wire.start + wire.delta("Hi"))
    for before, after, deltas in fed(name, parser, wire.keep_alive * 3):
        assert before == after and deltas == []
    end = fed(name, parser, wire.ending("Hi"))
    assert end and end[0][0] != end[-1][1]  # the idle bound restarts on the end's records
    assert parser.finish().content == "Hi"
