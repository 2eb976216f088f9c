"""GeminiProvider.stream: ``streamGenerateContent`` chunks, cut anywhere, give the whole answer.

Each generated answer is rendered twice, as the ``generateContent`` body and
as the Server-Sent Events of ``streamGenerateContent?alt=sse`` (its parts
spread over chunks, usage growing, the finish reason on the last chunk); the
stream's bytes are cut at arbitrary points and served through
``httpx.MockTransport``. The streamed response must equal ``parse_response``
of the whole body (call ids Gemini did not send are fresh on both sides, so
they are compared by position), and the deltas must add up to it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
)
from conversations.exceptions import (
    ProviderAuthenticationError,
    ProviderHTTPError,
    ProviderRateLimited,
    ProviderResponseError,
)
from conversations.providers.base import CompletionOptions
from conversations.providers.boundary import check_response
from conversations.providers.gemini import GeminiProvider, gemini_function_name
from tests.providers.mock_http import provider_with_replies
from tests.providers.mock_stream import broken_stream, collect, shown, streamed
from tests.strategies import (
    cut_points,
    split_bytes,
    split_list,
    streamed_answers,
    wire_call_ids,
)

KEY = "AIzaSyTest-0123456789abcdef"
MODEL = "gemini-test-1"
OPTIONS = CompletionOptions(model=MODEL)
HISTORY = [ChatMessage.user("What is 2 + 3?")]
# "1st_tool" goes by an alias on Gemini's wire; "lookup" is not offered at all.
TOOLS = (ToolSpec("add", "Add two numbers"), ToolSpec("1st_tool", "Starts with a digit"))
NAMES = st.sampled_from(["add", "1st_tool", "lookup"])

Part = dict[str, Any]


# Rendering one answer ----------------------------------------------------------------


def _call_parts(answer: dict[str, Any]) -> list[Part]:
    parts: list[Part] = []
    for position, call in enumerate(answer["calls"]):
        function: dict[str, Any] = {"name": gemini_function_name(call["name"])}
        if call["id"] is not None:
            function["id"] = call["id"]
        function["args"] = call["arguments"]
        part: Part = {"functionCall": function}
        if position == 0 and answer["signature"] is not None:
            part["thoughtSignature"] = answer["signature"]
        parts.append(part)
    return parts


def _usage(answer: dict[str, Any], output: int) -> dict[str, Any]:
    usage = answer["usage"]
    return {
        "promptTokenCount": usage["input"],
        "candidatesTokenCount": output,
        "cachedContentTokenCount": usage["cached"],
        "totalTokenCount": usage["input"] + output,
    }


def _response(answer: dict[str, Any], parts: list[Part], output: int, **candidate: Any) -> Part:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, **candidate, "index": 0}],
        "usageMetadata": _usage(answer, output),
        "modelVersion": MODEL,
        "responseId": "resp-1",
    }


def whole_body(answer: dict[str, Any]) -> dict[str, Any]:
    parts: list[Part] = []
    if thought := "".join(answer["reasoning"]):
        parts.append({"text": thought, "thought": True})
    if text := "".join(answer["text"]):
        parts.append({"text": text})
        if answer["signature"] is not None and not answer["calls"]:
            parts[-1]["thoughtSignature"] = answer["signature"]
    parts += _call_parts(answer)
    return _response(answer, parts, answer["usage"]["output"], finishReason="STOP")


def stream_chunks(
    answer: dict[str, Any],
    groups: list[int],
    *,
    trailing_signature: bool = False,
    separate_finish: bool = False,
    finish: bool = True,
) -> list[dict[str, Any]]:
    """The chunks Gemini sends for ``answer``: its parts cut into groups at ``groups``."""
    parts: list[Part] = [{"text": p, "thought": True} for p in answer["reasoning"] if p]
    texts: list[Part] = [{"text": p} for p in answer["text"] if p]
    if texts and answer["signature"] is not None and not answer["calls"]:
        # Gemini may close a streamed text with an empty part carrying the signature.
        if trailing_signature:
            texts.append({"text": "", "thoughtSignature": answer["signature"]})
        else:
            texts[0]["thoughtSignature"] = answer["signature"]
    parts += texts + _call_parts(answer)
    batches = [batch for batch in split_list(parts, groups) if batch] or [[]]
    if separate_finish:
        batches.append([{"text": ""}])
    output = answer["usage"]["output"]
    chunks = [
        _response(answer, batch, output * (number + 1) // len(batches))
        for number, batch in enumerate(batches)
    ]
    if finish:
        chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    return chunks


def sse(chunks: list[dict[str, Any]], newline: str = "\n") -> bytes:
    # Gemini frames each chunk as a bare data line (no event name).
    return "".join(
        f"data: {json.dumps(chunk, ensure_ascii=False)}{newline}{newline}" for chunk in chunks
    ).encode("utf-8")


def run(*replies: Any, history: list[ChatMessage] = HISTORY, **kwargs: Any) -> Any:
    """The provider, the items of its stream (or the error) and the requests sent."""
    provider, requests, sleeps = provider_with_replies(
        GeminiProvider, *replies, api_key=KEY, **kwargs
    )
    items = collect(provider.stream(history, tools=TOOLS, options=OPTIONS))
    return provider, items, requests, sleeps


def by_position(response: CompletionResponse) -> CompletionResponse:
    """``response`` with call ``i`` named ``#i`` (in its calls and its metadata)."""
    calls = response.tool_calls or ()
    names = {call.id: f"#{i}" for i, call in enumerate(calls)}
    metadata = json.loads(json.dumps(dict(response.provider_metadata)))
    ours = metadata.get("gemini", {})
    if "calls" in ours:
        ours["calls"] = {names[key]: value for key, value in ours["calls"].items()}
    return dataclasses.replace(
        response,
        tool_calls=tuple(dataclasses.replace(c, id=names[c.id]) for c in calls) or None,
        provider_metadata=metadata,
    )


# Properties ---------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    answer=streamed_answers(ids=wire_call_ids | st.none(), names=NAMES),
    groups=cut_points,
    points=cut_points,
    newline=st.sampled_from(["\n", "\r\n"]),
    trailing_signature=st.booleans(),
    separate_finish=st.booleans(),
)
def test_a_streamed_answer_is_the_whole_answer(
    answer: dict[str, Any],
    groups: list[int],
    points: list[int],
    newline: str,
    trailing_signature: bool,
    separate_finish: bool,
) -> None:
    chunks = stream_chunks(
        answer, groups, trailing_signature=trailing_signature, separate_finish=separate_finish
    )
    provider, items, requests, _ = run(streamed(split_bytes(sse(chunks, newline), points)))

    final = items[-1]
    assert isinstance(final, CompletionResponse), final
    assert not any(isinstance(item, CompletionResponse) for item in items[:-1])
    whole = provider.parse_response(whole_body(answer), tools=TOOLS)
    assert by_position(final) == by_position(check_response(whole, provider="gemini"))
    turn = shown(items)
    assert (turn.text, turn.reasoning) == (final.content, final.thinking or "")
    assert [(c["id"], c["name"], c["arguments"]) for c in turn.to_dict()["tool_calls"]] == [
        (call.id, call.name, call.arguments_json) for call in final.tool_calls or ()
    ]
    for call, sent in zip(final.tool_calls or (), answer["calls"], strict=True):
        assert call.name == sent["name"]  # the real name, not the wire alias
        if sent["id"] is not None:
            assert call.id == sent["id"]
    assert len(requests) == 1


@settings(max_examples=30, deadline=None)
@given(answer=streamed_answers(ids=st.just("fc_old"), names=NAMES, max_calls=1))
def test_a_reused_call_id_gets_one_fresh_id_shown_and_stored(answer: dict[str, Any]) -> None:
    answer["calls"] = answer["calls"] or [
        {"id": "fc_old", "name": "add", "arguments": {}, "pieces": []}
    ]
    answer["signature"] = "c2ln"
    history = [
        ChatMessage.user("Add."),
        ChatMessage.assistant_tool_calls([ToolCall(id="fc_old", name="add")]),
        ChatMessage.tool_result("fc_old", "5"),
    ]
    _, items, _, _ = run(streamed([sse(stream_chunks(answer, []))]), history=history)
    final = items[-1]
    assert isinstance(final, CompletionResponse)
    call = final.tool_calls[0] if final.tool_calls else None
    assert call is not None and call.id != "fc_old"
    assert shown(items).calls[0]["id"] == call.id
    # Gemini's own id and the signature are kept under the id shown and stored.
    native = {"id": "fc_old", "thought_signature": "c2ln"}
    assert final.provider_metadata == {"gemini": {"calls": {call.id: native}}}


def test_the_stream_url_and_key_and_body() -> None:
    answer = {"reasoning": [], "signature": None, "text": ["5"], "calls": []}
    answer["usage"] = {"input": 1, "output": 1, "cached": 0}
    provider, items, requests, _ = run(streamed([sse(stream_chunks(answer, []))]))
    assert isinstance(items[-1], CompletionResponse)
    url = str(requests[0].url)
    base = "https://generativelanguage.googleapis.com/v1beta"
    assert url == f"{base}/models/{MODEL}:streamGenerateContent?alt=sse"
    assert KEY not in url and requests[0].headers["x-goog-api-key"] == KEY
    assert json.loads(requests[0].content) == provider.build_payload(HISTORY, TOOLS, OPTIONS)


def test_deltas_come_as_the_parts_arrive() -> None:
    answer = {
        "reasoning": ["Adding", "."],
        "signature": "c2ln",
        "text": ["Calling add."],
        "calls": [{"id": None, "name": "1st_tool", "arguments": {"a": 2}, "pieces": []}],
        "usage": {"input": 3, "output": 4, "cached": 0},
    }
    _, items, _, _ = run(streamed([sse(stream_chunks(answer, [1, 2, 3]))]))
    final = items[-1]
    call_id = final.tool_calls[0].id
    assert items[:-1] == [
        ReasoningDelta("Adding"),
        ReasoningDelta("."),
        TextDelta("Calling add."),
        ToolCallDelta(0, call_id, "1st_tool", '{"a":2}'),
    ]
    assert final.provider_metadata == {
        "gemini": {"calls": {call_id: {"thought_signature": "c2ln"}}}
    }


def test_a_prompt_blocked_before_any_candidate_is_a_content_filter_answer() -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "modelVersion": MODEL}
    provider, items, _, _ = run(streamed([sse([blocked])]))
    assert items == [provider.parse_response(blocked)]
    assert items[0].finish_reason == "content_filter"


# Failures ---------------------------------------------------------------------------


def _text_answer() -> dict[str, Any]:
    return {
        "reasoning": [],
        "signature": None,
        "text": ["Five", "."],
        "calls": [],
        "usage": {"input": 3, "output": 4, "cached": 0},
    }


def _error(code: int, status: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "status": status, "message": message}}


def test_an_error_chunk_after_a_delta_fails_the_stream_without_a_retry() -> None:
    chunks = [*stream_chunks(_text_answer(), [1], finish=False)[:1], _error(503, "UNAVAILABLE", "")]
    _, items, requests, _ = run(streamed([sse(chunks)]), max_retries=2)
    assert items[0] == TextDelta("Five")
    assert isinstance(items[-1], ProviderResponseError)
    assert "UNAVAILABLE" in str(items[-1])
    assert len(requests) == 1


def test_an_error_chunk_before_any_delta_is_retried() -> None:
    failing = sse([_error(500, "INTERNAL", "try again")])
    _, items, requests, sleeps = run(
        streamed([failing]), streamed([sse(stream_chunks(_text_answer(), []))]), max_retries=1
    )
    assert isinstance(items[-1], CompletionResponse) and items[-1].content == "Five."
    assert len(requests) == 2 and len(sleeps) == 1


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        (429, "RESOURCE_EXHAUSTED", ProviderRateLimited),
        (403, "PERMISSION_DENIED", ProviderAuthenticationError),
        (400, "INVALID_ARGUMENT", ProviderHTTPError),
        (503, "UNAVAILABLE", ProviderResponseError),
        (None, "", ProviderResponseError),
    ],
)
def test_error_chunks_map_to_the_error_tree_and_hide_the_key(
    code: int | None, status: str, error: type[Exception]
) -> None:
    _, items, _, _ = run(
        streamed([sse([{"error": {"code": code, "status": status, "message": f"key {KEY}"}}])]),
        max_retries=0,
    )
    assert type(items[-1]) is error
    assert KEY not in str(items[-1]) and "[redacted]" in str(items[-1])


def test_a_stream_broken_off_after_a_delta_is_not_retried() -> None:
    data = sse(stream_chunks(_text_answer(), [1], finish=False)[:1])
    _, items, requests, _ = run(broken_stream([data]), max_retries=2)
    assert items[0] == TextDelta("Five")
    assert isinstance(items[-1], ProviderResponseError)
    assert len(requests) == 1


def test_a_stream_broken_off_before_any_delta_is_retried() -> None:
    _, items, requests, _ = run(
        broken_stream([b'data: {"candi']),
        streamed([sse(stream_chunks(_text_answer(), []))]),
        max_retries=1,
    )
    assert isinstance(items[-1], CompletionResponse)
    assert len(requests) == 2


def test_a_stream_without_a_finish_reason_fails() -> None:
    data = sse(stream_chunks(_text_answer(), [1], finish=False))
    _, items, requests, _ = run(streamed([data]), max_retries=2)
    assert isinstance(items[-1], ProviderResponseError)
    assert "finishReason" in str(items[-1])
    assert len(requests) == 1


@pytest.mark.parametrize(
    "record",
    [
        "data: {not json\n\n",
        "data: []\n\n",
        'data: {"candidates": {"content": {}}}\n\n',
        'data: {"candidates": [{"content": {"parts": "text"}}]}\n\n',
        'data: {"candidates": [{"content": {"parts": [5]}}]}\n\n',
    ],
)
def test_a_malformed_chunk_after_a_delta_fails_the_stream(record: str) -> None:
    data = sse(stream_chunks(_text_answer(), [1], finish=False)[:1]) + record.encode()
    _, items, requests, _ = run(streamed([data]), max_retries=2)
    assert isinstance(items[-1], ProviderResponseError)
    assert "could not understand the stream" in str(items[-1])
    assert len(requests) == 1


def test_stray_parts_merge_as_the_whole_body_reads_them() -> None:
    answer = {
        "reasoning": [],
        "signature": None,
        "text": ["Five."],
        "calls": [{"id": "fc_1", "name": "add", "arguments": {"a": 1}, "pieces": []}],
        "usage": {"input": 3, "output": 4, "cached": 0},
    }
    chunks = stream_chunks(answer, [1])
    nameless = {"functionCall": {"args": {}}}
    chunks[0]["candidates"][0]["content"]["parts"] += [{"thoughtSignature": "c2ln"}, nameless]
    chunks.insert(0, {"candidates": [], "modelVersion": MODEL})
    provider, items, _, _ = run(streamed([sse(chunks)]))
    body = whole_body(answer)
    body["candidates"][0]["content"]["parts"][0]["thoughtSignature"] = "c2ln"
    body["candidates"][0]["content"]["parts"].insert(1, nameless)
    assert items[-1] == provider.parse_response(body, tools=TOOLS)
    assert items[:-1] == [TextDelta("Five."), ToolCallDelta(0, "fc_1", "add", '{"a":1}')]
