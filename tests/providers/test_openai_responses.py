"""The Responses API adapter: request items, parsing, reasoning replay, streaming and errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from conversations.exceptions import (
    ProviderAuthenticationError,
    ProviderHTTPError,
    ProviderRateLimited,
    ProviderResponseError,
)
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.base import CompletionOptions
from conversations.providers.openai_responses import METADATA_KEY, OpenAIResponsesProvider
from tests.providers.mock_http import provider_with_replies
from tests.providers.mock_stream import collect
from tests.providers.responses_server import (
    call_item,
    message_item,
    reasoning_item,
    response_body,
    stream_events,
    streamed_reply,
    whole_reply,
)
from tests.providers.stream_checks import check_stream

KEY = "sk-test-0123456789abcdef"
OPTIONS = CompletionOptions(model="gpt-5-mini")
ADD = ToolSpec(
    "add",
    "Add two integers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)
REASONING = reasoning_item("rs_1", ["Adding two numbers."], "gAAAAencrypted==")
CALL = ToolCall(id="call_1", name="add", arguments={"a": 1, "b": 2})
METADATA = {METADATA_KEY: {"reasoning": [REASONING], "call_items": {"call_1": "fc_1"}}}
TOOL_ROUND = response_body(
    [REASONING, call_item("fc_1", "call_1", "add", '{"a": 1, "b": 2}')],
    usage=(40, 30, 8, 20),
)

# A calls reply (reasoning, two parallel calls, one without arguments) and a text reply.
REFERENCE_CALLS = response_body(
    [
        reasoning_item("rs_ref", ["Weather and time."], "gAAAAref=="),
        call_item("fc_w", "call_Wx1aB2cD3eF4gH5iJ6kL7mN8", "get_weather", '{"city":"Paris"}'),
        call_item("fc_t", "call_Pq9rS8tU7vW6xY5zA4bC3dE2", "get_time", "{}"),
    ]
)
REFERENCE_TEXT = response_body([message_item("msg_ref", "Paris: 18 °C, and it is 14:05.")])


def provider(**kwargs: Any) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(api_key=KEY, **kwargs)


def history_with_a_call(metadata: dict[str, Any] | None = METADATA) -> list[ChatMessage]:
    return [
        ChatMessage.system("Be brief."),
        ChatMessage.user("1+2?"),
        ChatMessage.assistant_tool_calls([CALL], "Let me add.", provider_metadata=metadata),
        ChatMessage.tool_result("call_1", "3"),
    ]


# Requests -----------------------------------------------------------------------


def test_the_history_becomes_messages_and_call_items_paired_by_call_id() -> None:
    body = provider().build_payload(history_with_a_call(), [ADD], OPTIONS)
    assert body["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "1+2?"},
        REASONING,
        {"role": "assistant", "content": "Let me add."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "add",
            "arguments": '{"a":1,"b":2}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "3"},
    ]
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add two integers.",
            "parameters": dict(ADD.parameters),
            "strict": False,
        }
    ]


def test_options_map_to_their_responses_keys_and_tool_keys_travel_only_with_tools() -> None:
    options = CompletionOptions(
        model="gpt-5-mini",
        temperature=0.3,
        max_tokens=99,
        tool_choice="add",
        parallel_tool_calls=False,
    )
    with_tools = provider().build_payload([ChatMessage.user("hi")], [ADD], options)
    assert with_tools["tool_choice"] == {"type": "function", "name": "add"}
    assert with_tools["parallel_tool_calls"] is False
    assert (with_tools["temperature"], with_tools["max_output_tokens"]) == (0.3, 99)
    bare = provider().build_payload([ChatMessage.user("hi")], [], options)
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(bare)


def test_extra_options_may_turn_storage_back_on() -> None:
    options = CompletionOptions(model="m", extra={"store": True, "include": []})
    body = provider().build_payload([ChatMessage.user("hi")], [], options)
    assert (body["store"], body["include"]) == (True, [])


def test_stop_sequences_are_refused_by_name_rather_than_dropped() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        provider().build_payload([ChatMessage.user("hi")], [], CompletionOptions("m", stop=("x",)))
    assert caught.value.field == "stop"


def test_a_result_answering_no_earlier_call_is_refused() -> None:
    history = [ChatMessage.user("hi"), ChatMessage.tool_result("call_9", "3")]
    with pytest.raises(InvalidArgumentError) as caught:
        provider().build_payload(history, [], OPTIONS)
    assert caught.value.code == "unknown_tool_call_id"


def test_another_providers_metadata_replays_nothing() -> None:
    foreign = {"anthropic": {"thinking_blocks": [{"type": "thinking", "thinking": "t"}]}}
    body = provider().build_payload(history_with_a_call(foreign), [ADD], OPTIONS)
    kinds = [item.get("type") for item in body["input"]]
    assert "reasoning" not in kinds
    assert "id" not in body["input"][3]  # no item id from this API either


def test_a_reasoning_item_without_encrypted_content_is_not_replayed() -> None:
    stored_only = reasoning_item("rs_2", ["s"], None)
    metadata = {METADATA_KEY: {"reasoning": [stored_only, REASONING]}}
    body = provider().build_payload(history_with_a_call(metadata), [ADD], OPTIONS)
    assert [item for item in body["input"] if item.get("type") == "reasoning"] == [REASONING]


def test_anthropic_never_sees_the_reasoning_items_of_this_adapter() -> None:
    body = AnthropicProvider(api_key=KEY).build_payload(history_with_a_call(), [ADD], OPTIONS)
    text = json.dumps(body)
    assert "encrypted" not in text and "rs_1" not in text and "fc_1" not in text
    assert body["messages"][1]["content"][-1]["type"] == "tool_use"


# Responses ----------------------------------------------------------------------


def test_a_tool_round_is_parsed_with_its_reasoning_kept_for_replay() -> None:
    parsed = provider().parse_response(TOOL_ROUND)
    assert parsed.tool_calls == (CALL,)
    assert parsed.finish_reason == "tool_calls"
    assert parsed.thinking == "Adding two numbers."
    assert parsed.usage == Usage(40, 30, cached_prompt_tokens=8, reasoning_tokens=20)
    assert parsed.provider_metadata == METADATA
    assert parsed.provider == "openai_responses"
    assert parsed.model == "gpt-5-mini-2025-08-07"


def test_text_parts_and_summaries_join_and_a_refusal_is_the_text() -> None:
    refusal = message_item("msg_2", "")
    refusal["content"] = [{"type": "refusal", "refusal": "I can't help with that."}]
    body = response_body(
        [
            reasoning_item("rs_1", ["First.", "Second."], "enc"),
            message_item("msg_1", "Hello "),
            refusal,
        ]
    )
    parsed = provider().parse_response(body)
    assert parsed.content == "Hello I can't help with that."
    assert parsed.thinking == "First.\n\nSecond."
    assert parsed.tool_calls is None and parsed.finish_reason == "stop"


@pytest.mark.parametrize(
    ("reason", "finish"), [("max_output_tokens", "length"), ("content_filter", "content_filter")]
)
def test_an_incomplete_response_says_why_it_stopped(reason: str, finish: str) -> None:
    body = response_body(
        [message_item("msg_1", "Partial")], status="incomplete", incomplete_reason=reason
    )
    assert provider().parse_response(body).finish_reason == finish


def test_a_reused_call_id_gets_a_fresh_one_and_loses_the_item_id() -> None:
    parsed = provider().parse_response(TOOL_ROUND, known_ids={"call_1"})
    assert parsed.tool_calls is not None and parsed.tool_calls[0].id != "call_1"
    assert "call_items" not in parsed.provider_metadata[METADATA_KEY]


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("rate_limit_exceeded", ProviderRateLimited),
        ("invalid_prompt", ProviderHTTPError),
        ("server_error", ProviderResponseError),
    ],
)
def test_a_failed_response_maps_to_the_error_tree(code: str, error: type[Exception]) -> None:
    body = response_body([], status="failed")
    body["error"] = {"code": code, "message": f"no ({KEY})"}
    with pytest.raises(error) as caught:
        provider().parse_response(body)
    assert KEY not in str(caught.value)


# HTTP -------------------------------------------------------------------------


def test_the_request_goes_to_responses_with_a_bearer_key() -> None:
    adapter, requests, _ = provider_with_replies(
        OpenAIResponsesProvider, whole_reply(TOOL_ROUND), api_key=KEY
    )
    adapter.complete([ChatMessage.user("1+2?")], tools=[ADD], options=OPTIONS)
    assert str(requests[0].url) == "https://api.openai.com/v1/responses"
    assert requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_azure_needs_its_base_url_and_sends_an_api_key_header() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        provider(preset="azure_openai")
    assert caught.value.field == "base_url"
    base = "https://example.openai.azure.com/openai/v1"
    adapter, requests, _ = provider_with_replies(
        OpenAIResponsesProvider,
        whole_reply(TOOL_ROUND),
        api_key=KEY,
        preset="azure_openai",
        base_url=base,
    )
    adapter.complete([ChatMessage.user("1+2?")], options=OPTIONS)
    assert str(requests[0].url) == f"{base}/responses"
    assert requests[0].headers["api-key"] == KEY
    assert "authorization" not in requests[0].headers


def test_an_unknown_preset_and_an_api_version_are_refused_by_name() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        provider(preset="mistral")
    assert caught.value.field == "preset"
    with pytest.raises(InvalidArgumentError) as caught:
        provider(preset="azure_openai", base_url="https://x.example/v1", api_version="2025-04-01")
    assert caught.value.field == "api_version"


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, ProviderAuthenticationError), (429, ProviderRateLimited), (400, ProviderHTTPError)],
)
def test_http_errors_map_like_every_adapters(status: int, error: type[Exception]) -> None:
    reply = httpx.Response(status, json={"error": {"message": "no", "code": None}})
    adapter, _, _ = provider_with_replies(
        OpenAIResponsesProvider, reply, api_key=KEY, max_retries=0
    )
    with pytest.raises(error):
        adapter.complete([ChatMessage.user("hi")], options=OPTIONS)


# Streaming --------------------------------------------------------------------


def streamed(*replies: Any, **kwargs: Any) -> tuple[list[Any], list[httpx.Request]]:
    adapter, requests, _ = provider_with_replies(
        OpenAIResponsesProvider, *replies, api_key=KEY, **kwargs
    )
    return collect(adapter.stream([ChatMessage.user("1+2?")], tools=[ADD], options=OPTIONS)), (
        requests
    )


@pytest.mark.parametrize(
    "body",
    [
        TOOL_ROUND,
        response_body(
            [
                reasoning_item("rs_1", ["First part.", "Second part."], "enc"),
                message_item("msg_1", "It is 3, as computed."),
            ]
        ),
        response_body(
            [
                message_item("msg_1", "Two calls."),
                call_item("fc_1", "call_a", "add", '{"a": 1, "b": 2}'),
                call_item("fc_2", "call_b", "add", ""),
            ]
        ),
    ],
)
def test_a_streamed_answer_is_the_whole_answer(body: dict[str, Any]) -> None:
    items, requests = streamed(streamed_reply(body))
    check_stream(items, provider().parse_response(body))
    assert json.loads(requests[0].content)["stream"] is True


def test_the_deltas_arrive_as_text_reasoning_and_call_pieces() -> None:
    items, _ = streamed(streamed_reply(TOOL_ROUND))
    assert items[0] == ReasoningDelta("Addi")
    assert ToolCallDelta(0, "call_1", "add", "") in items
    assert ToolCallDelta(0, arguments='{"a"') in items
    reply = response_body([message_item("msg_1", "Hi!")])
    text_items, _ = streamed(streamed_reply(reply))
    assert text_items[0] == TextDelta("Hi!")


def _sse(events: list[dict[str, Any]]) -> httpx.Response:
    text = "".join(f"data: {json.dumps(event)}\n\n" for event in events)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text)


def test_an_error_event_after_a_delta_fails_the_stream_without_a_retry() -> None:
    events = stream_events(response_body([message_item("msg_1", "Hello there")]))[:3]
    events.append({"type": "error", "code": "server_error", "message": "boom", "param": None})
    items, requests = streamed(_sse(events), max_retries=2)
    assert items[0] == TextDelta("Hell")
    assert isinstance(items[-1], ProviderResponseError) and "server_error" in str(items[-1])
    assert len(requests) == 1


def test_a_failed_event_before_any_delta_is_retried() -> None:
    failed = response_body([], status="failed")
    failed["error"] = {"code": "server_error", "message": "try again"}
    events = [{"type": "response.failed", "response": failed}]
    good = response_body([message_item("msg_1", "Done.")])
    items, requests = streamed(_sse(events), streamed_reply(good), max_retries=1)
    assert isinstance(items[-1], CompletionResponse) and items[-1].content == "Done."
    assert len(requests) == 2


def test_a_rate_limit_event_is_a_rate_limit() -> None:
    events = [{"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}]
    items, _ = streamed(_sse(events), max_retries=0)
    assert isinstance(items[-1], ProviderRateLimited)


def test_a_stream_without_its_completed_event_fails() -> None:
    events = stream_events(response_body([message_item("msg_1", "Hello")]))[:-1]
    items, _ = streamed(_sse(events), max_retries=0)
    assert isinstance(items[-1], ProviderResponseError)
    assert "response.completed" in str(items[-1])


def test_a_final_event_without_output_takes_the_streamed_items() -> None:
    body = response_body([message_item("msg_1", "Kept.")])
    events = stream_events(body)
    events[-1]["response"]["output"] = []
    items, _ = streamed(_sse(events))
    assert isinstance(items[-1], CompletionResponse) and items[-1].content == "Kept."
