"""AnthropicProvider: worked examples of the vendor wire format, the conversion rules, and HTTP.

No network: every exchange goes through ``httpx.MockTransport``, and every
request body built here is checked by ``validate_anthropic_request``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.domain import ChatMessage, InvalidArgumentError, Role, ToolCall, ToolSpec
from conversations.exceptions import (
    ProviderResponseError,
)
from conversations.providers.anthropic import AnthropicProvider, wire_call_id
from conversations.providers.base import CompletionOptions
from tests.providers.mock_http import Reply, provider_with_replies
from tests.providers.wire_anthropic import validate_anthropic_request
from tests.strategies import histories as shared_histories

KEY = "sk-ant-test-9f8e7d6c5b4a"

# Worked examples in the Messages API shape: a request, a calls reply, a text reply.
REFERENCE_A = json.loads(
    r"""
{
  "model": "claude-sonnet-4-5",
  "max_tokens": 1024,
  "system": "You are a helpful assistant.",
  "messages": [
    {"role": "user", "content": "What's the weather in Paris, and what time is it?"},
    {
      "role": "assistant",
      "content": [
        {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_01B7hJ2kL4mN6pQ8rS0tU2vW", "name": "get_time", "input": {}}
      ]
    },
    {
      "role": "user",
      "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "{\"temp_c\": 18, \"conditions\": \"cloudy\"}"},
        {"type": "tool_result", "tool_use_id": "toolu_01B7hJ2kL4mN6pQ8rS0tU2vW", "content": "2026-08-22T14:05:00+02:00"}
      ]
    }
  ],
  "tools": [
    {
      "name": "get_weather",
      "description": "Get the current weather for a city",
      "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"]
      }
    },
    {
      "name": "get_time",
      "description": "Get the current local time",
      "input_schema": {"type": "object", "properties": {}}
    }
  ],
  "tool_choice": {"type": "auto"}
}
"""
)

REFERENCE_B = json.loads(
    r"""
{
  "id": "msg_01Aq9w938a90dw8q",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": "I'll check the weather and the time for you."},
    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris"}},
    {"type": "tool_use", "id": "toolu_01B7hJ2kL4mN6pQ8rS0tU2vW", "name": "get_time", "input": {}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {
    "input_tokens": 412,
    "output_tokens": 96,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "service_tier": "standard"
  }
}
"""
)

REFERENCE_C = json.loads(
    r"""
{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": "It is 18 °C and cloudy in Paris, and the local time is 14:05."}
  ],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {
    "input_tokens": 156,
    "output_tokens": 24,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 1024,
    "service_tier": "standard"
  }
}
"""
)

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather for a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
)
TIME = ToolSpec("get_time", "Get the current local time")
TOOLS = (WEATHER, TIME)
ID_A = "toolu_01A09q90qw90lq917835lq9"
ID_B = "toolu_01B7hJ2kL4mN6pQ8rS0tU2vW"
WEATHER_RESULT = '{"temp_c": 18, "conditions": "cloudy"}'
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def reference_history(id_a: str = ID_A, id_b: str = ID_B) -> list[ChatMessage]:
    """The conversation of example (a), built the way the tool loop builds it."""
    return [
        ChatMessage.system("You are a helpful assistant."),
        ChatMessage.user("What's the weather in Paris, and what time is it?"),
        ChatMessage.assistant_tool_calls(
            [ToolCall(id_a, "get_weather", {"city": "Paris"}), ToolCall(id_b, "get_time")]
        ),
        ChatMessage.tool_result(id_a, WEATHER_RESULT),
        ChatMessage.tool_result(id_b, "2026-08-22T14:05:00+02:00"),
    ]


def options(**kwargs: Any) -> CompletionOptions:
    kwargs.setdefault("model", "claude-sonnet-4-5")
    return CompletionOptions(**kwargs)


def build(
    messages: list[ChatMessage], tools: tuple[ToolSpec, ...] = (), **kwargs: Any
) -> dict[str, Any]:
    """build_payload, with the body checked against the 400 table."""
    body = AnthropicProvider(api_key=KEY).build_payload(messages, tools, options(**kwargs))
    assert validate_anthropic_request(body) == []
    return body


def mock_provider(
    *outcomes: Reply, **kwargs: Any
) -> tuple[AnthropicProvider, list[httpx.Request], list[float]]:
    """A AnthropicProvider whose client answers with ``outcomes`` in turn."""
    return provider_with_replies(
        AnthropicProvider, *outcomes, api_key=kwargs.pop("api_key", KEY), **kwargs
    )


def sent(request: httpx.Request) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(request.content)
    assert validate_anthropic_request(body) == []
    return body


# Worked examples of the wire format (the REFERENCE_* bodies above) ------------------


def test_reference_request_a_is_built_from_chat_messages() -> None:
    body = build(reference_history(), TOOLS, max_tokens=1024, tool_choice="auto")
    assert body == REFERENCE_A


def test_reference_response_b_parses_calls_text_and_usage() -> None:
    response = AnthropicProvider(api_key=KEY).parse_response(REFERENCE_B)
    assert response.content == "I'll check the weather and the time for you."
    assert response.finish_reason == "tool_calls"
    assert response.provider == "anthropic"
    assert response.model == "claude-sonnet-4-5-20250929"
    assert response.tool_calls is not None
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        (ID_A, "get_weather", {"city": "Paris"}),
        (ID_B, "get_time", {}),
    ]
    assert [c.arguments_json for c in response.tool_calls] == ['{"city":"Paris"}', "{}"]
    assert response.usage.to_dict() == {
        "prompt_tokens": 412,
        "completion_tokens": 96,
        "total_tokens": 508,
        "cached_prompt_tokens": 0,
        "reasoning_tokens": 0,
    }
    assert response.provider_metadata == {}


def test_reference_response_c_counts_cache_reads_as_prompt() -> None:
    response = AnthropicProvider(api_key=KEY).parse_response(REFERENCE_C)
    assert response.content == "It is 18 °C and cloudy in Paris, and the local time is 14:05."
    assert response.finish_reason == "stop"
    assert response.tool_calls is None
    assert response.usage.prompt_tokens == 1180
    assert response.usage.cached_prompt_tokens == 1024
    assert response.usage.completion_tokens == 24
    assert response.usage.total_tokens == 1204


def test_cache_creation_tokens_count_as_prompt() -> None:
    body = {**REFERENCE_C, "usage": {"input_tokens": 10, "output_tokens": 2,
                                     "cache_creation_input_tokens": 5,
                                     "cache_read_input_tokens": None}}  # fmt: skip
    usage = AnthropicProvider(api_key=KEY).parse_response(body).usage
    assert (usage.prompt_tokens, usage.cached_prompt_tokens, usage.total_tokens) == (15, 0, 17)


# End to end through the transport -----------------------------------------------------


def test_history_reaches_the_http_body_with_calls_and_ids_intact() -> None:
    provider, requests, _ = mock_provider(httpx.Response(200, json=REFERENCE_C))
    history = reference_history(id_a="call.gemini:1", id_b="call_plain")
    response = provider.complete(
        history, tools=TOOLS, options=options(max_tokens=1024, tool_choice="auto")
    )
    assert response.content.startswith("It is 18")
    (request,) = requests
    assert request.method == "POST"
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = sent(request)
    rewritten = wire_call_id("call.gemini:1")
    assert ANTHROPIC_ID.match(rewritten)
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": rewritten, "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_plain", "name": "get_time", "input": {}},
    ]
    assert [b["tool_use_id"] for b in body["messages"][2]["content"]] == [rewritten, "call_plain"]
    # Apart from the ids, the body is the worked example's.
    assert body["messages"][0] == REFERENCE_A["messages"][0]
    assert body["tools"] == REFERENCE_A["tools"]


def test_thinking_blocks_are_kept_and_replayed_before_tool_use() -> None:
    thinking = {"type": "thinking", "thinking": "Two lookups.", "signature": "EqQBCgIYAh=="}
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgB"}
    first = {**REFERENCE_B, "content": [thinking, redacted, *REFERENCE_B["content"]]}
    provider, requests, _ = mock_provider(
        httpx.Response(200, json=first), httpx.Response(200, json=REFERENCE_C)
    )
    history = reference_history()[:2]
    response = provider.complete(history, tools=TOOLS, options=options())
    assert response.thinking == "Two lookups."
    assert response.provider_metadata == {"anthropic": {"thinking_blocks": [thinking, redacted]}}
    assert response.tool_calls is not None
    history += [
        response.to_message(),
        *(ChatMessage.tool_result(call.id, "done") for call in response.tool_calls),
    ]
    provider.complete(history, tools=TOOLS, options=options())
    assistant = sent(requests[1])["messages"][1]["content"]
    assert [block["type"] for block in assistant] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
        "tool_use",
    ]
    assert assistant[:2] == [thinking, redacted]


# Conversion rules ----------------------------------------------------------------------


def test_several_system_messages_are_joined_in_order() -> None:
    body = build(
        [
            ChatMessage.system("First rule."),
            ChatMessage.user("Hi"),
            ChatMessage.system("Second rule."),
        ]
    )
    assert body["system"] == "First rule.\n\nSecond rule."
    assert body["messages"] == [{"role": "user", "content": "Hi"}]


def test_no_system_key_and_no_tool_keys_when_there_are_none() -> None:
    body = build([ChatMessage.user("Hi")], tool_choice="required", parallel_tool_calls=False)
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Hi"}],
    }


@pytest.mark.parametrize("stored", ["call.1", "fc:abc|2", "tool call/3", "ü"])
def test_foreign_ids_are_rewritten_the_same_way_on_call_and_result(stored: str) -> None:
    body = build(reference_history(id_a=stored))
    call_id = body["messages"][1]["content"][0]["id"]
    assert ANTHROPIC_ID.match(call_id)
    assert call_id != stored
    assert body["messages"][2]["content"][0]["tool_use_id"] == call_id


def test_valid_ids_are_sent_unchanged() -> None:
    body = build(reference_history(id_a="call_abc-123"))
    assert body["messages"][1]["content"][0]["id"] == "call_abc-123"


def test_raw_arguments_go_out_as_an_empty_object() -> None:
    history = reference_history()
    history[2] = ChatMessage.assistant_tool_calls(
        [ToolCall(ID_A, "get_weather", raw_arguments='{"city": "Par'), ToolCall(ID_B, "get_time")]
    )
    body = build(history)
    assert body["messages"][1]["content"][0]["input"] == {}


def test_results_go_in_one_user_message_in_call_order_then_user_text() -> None:
    history = reference_history()
    history[3], history[4] = history[4], history[3]  # results stored out of order
    history.append(ChatMessage.user("And tomorrow?"))
    content = build(history)["messages"][2]["content"]
    assert content == [
        {"type": "tool_result", "tool_use_id": ID_A, "content": WEATHER_RESULT},
        {"type": "tool_result", "tool_use_id": ID_B, "content": "2026-08-22T14:05:00+02:00"},
        {"type": "text", "text": "And tomorrow?"},
    ]


def test_assistant_text_before_calls_is_a_text_block_first() -> None:
    history = reference_history()
    history[2] = ChatMessage.assistant_tool_calls(
        [ToolCall(ID_A, "get_weather", {"city": "Paris"}), ToolCall(ID_B, "get_time")],
        "Let me look.",
    )
    blocks = build(history)["messages"][1]["content"]
    assert blocks[0] == {"type": "text", "text": "Let me look."}
    assert [b["type"] for b in blocks[1:]] == ["tool_use", "tool_use"]


@pytest.mark.parametrize("blank", ["", "  ", "\n"])
def test_blank_text_is_never_sent(blank: str) -> None:
    history = reference_history()
    history[2] = ChatMessage.assistant_tool_calls(
        [ToolCall(ID_A, "get_weather", {"city": "Paris"}), ToolCall(ID_B, "get_time")], blank
    )
    history[4] = ChatMessage.tool_result(ID_B, blank)
    history += [ChatMessage.user(blank), ChatMessage.assistant(blank), ChatMessage.user("Thanks")]
    body = build(history)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use", "tool_use"]
    # The empty result keeps its block (never dropped), without content.
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": ID_A, "content": WEATHER_RESULT},
        {"type": "tool_result", "tool_use_id": ID_B},
        {"type": "text", "text": "Thanks"},
    ]


def test_a_history_with_nothing_to_send_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build([ChatMessage.system("Rules."), ChatMessage.user(" ")])
    assert caught.value.code == "no_messages"


def test_consecutive_same_role_messages_are_merged() -> None:
    body = build(
        [
            ChatMessage.user("One"),
            ChatMessage.user("Two"),
            ChatMessage.assistant("Three"),
            ChatMessage.assistant("Four"),
            ChatMessage.user("Five"),
        ]
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "One"}, {"type": "text", "text": "Two"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Three"}, {"type": "text", "text": "Four"}]},
        {"role": "user", "content": "Five"},
    ]  # fmt: skip


def test_a_final_assistant_prefill_loses_trailing_whitespace() -> None:
    body = build([ChatMessage.user("Hi"), ChatMessage.assistant("The answer is \n")])
    assert body["messages"][-1] == {"role": "assistant", "content": "The answer is"}


def test_a_result_answering_no_call_is_refused() -> None:
    history = [*reference_history(), ChatMessage.tool_result("toolu_unknown", "x")]
    with pytest.raises(InvalidArgumentError) as caught:
        build(history)
    assert caught.value.code == "unknown_tool_call_id"
    assert caught.value.field == "5/tool_call_id"


def test_a_result_for_an_older_turn_is_refused() -> None:
    history = [
        *reference_history(),
        ChatMessage.assistant("Done."),
        ChatMessage.user("Again?"),
        ChatMessage.tool_result(ID_A, "late"),
    ]
    with pytest.raises(InvalidArgumentError) as caught:
        build(history)
    assert caught.value.code == "unknown_tool_call_id"


def test_a_tool_message_without_call_id_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build([ChatMessage.user("Hi"), ChatMessage.tool("orphan")])
    assert caught.value.code == "missing_tool_call_id"


def test_a_call_answered_twice_is_refused() -> None:
    history = [*reference_history(), ChatMessage.tool_result(ID_B, "again")]
    with pytest.raises(InvalidArgumentError) as caught:
        build(history)
    assert caught.value.code == "duplicate_tool_result"


@pytest.mark.parametrize("cut", [3, 4])
def test_an_unanswered_call_is_refused_never_sent(cut: int) -> None:
    history = [*reference_history()[:cut], ChatMessage.user("Well?")]
    with pytest.raises(InvalidArgumentError) as caught:
        build(history)
    assert caught.value.code == "unanswered_tool_call"
    assert caught.value.field is not None and caught.value.field.startswith("2/tool_calls/")


def test_two_ids_sharing_an_alias_are_refused() -> None:
    alias = wire_call_id("a.b")
    history = [
        ChatMessage.user("Hi"),
        ChatMessage.assistant_tool_calls(
            [ToolCall("a.b", "get_time"), ToolCall(alias, "get_time")]
        ),
        ChatMessage.tool_result("a.b", "1"),
        ChatMessage.tool_result(alias, "2"),
    ]
    with pytest.raises(InvalidArgumentError) as caught:
        build(history)
    assert caught.value.code == "call_id_collision"


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("none", None, {"type": "none"}),
        ("required", None, {"type": "any"}),
        ("get_time", None, {"type": "tool", "name": "get_time"}),
        (None, None, None),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        (
            "get_time",
            False,
            {"type": "tool", "name": "get_time", "disable_parallel_tool_use": True},
        ),
        ("none", False, {"type": "none"}),
        ("auto", True, {"type": "auto"}),
    ],
)
def test_tool_choice_mapping(
    choice: str | None, parallel: bool | None, expected: dict[str, Any] | None
) -> None:
    body = build([ChatMessage.user("Hi")], TOOLS, tool_choice=choice, parallel_tool_calls=parallel)
    assert body.get("tool_choice") == expected
    assert [tool["name"] for tool in body["tools"]] == ["get_weather", "get_time"]


def test_a_forced_tool_that_is_not_offered_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build([ChatMessage.user("Hi")], TOOLS, tool_choice="get_news")
    assert caught.value.code == "unknown_tool_choice"


def test_sampling_options_and_extra() -> None:
    body = build(
        [ChatMessage.user("Hi")],
        temperature=1.7,
        max_tokens=50,
        stop=("END",),
        extra={"top_k": 5, "max_tokens": 60},
        sampling_parameters={"temperature"},  # a model that still takes it
    )
    assert body["temperature"] == 1.0
    assert body["stop_sequences"] == ["END"]
    assert body["top_k"] == 5
    assert body["max_tokens"] == 60  # extra is merged last


def test_temperature_is_not_sent_by_default_current_models_refuse_it() -> None:
    assert AnthropicProvider.default_sampling_parameters == frozenset()
    body = build([ChatMessage.user("Hi")], temperature=0.3)
    assert "temperature" not in body
    assert validate_anthropic_request(body) == []


def test_a_model_that_accepts_no_sampling_parameter_gets_none() -> None:
    body = build([ChatMessage.user("Hi")], temperature=0.3, sampling_parameters=())
    assert "temperature" not in body


def test_an_error_result_is_flagged_natively_and_only_then() -> None:
    history = [
        *reference_history()[:3],
        ChatMessage.tool_result(ID_A, "ConnectionError: timed out", is_error=True),
        ChatMessage.tool_result(ID_B, "2026-08-22T14:05:00+02:00"),
    ]
    failed, fine = build(history)["messages"][2]["content"]
    assert failed == {
        "type": "tool_result",
        "tool_use_id": ID_A,
        "content": "ConnectionError: timed out",
        "is_error": True,
    }
    assert "is_error" not in fine


# Response parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "length"),  # still paused after the last continuation
        ("tool_use", "stop"),  # but no call survived
        ("something_new", "stop"),
        (None, "stop"),
    ],
)
def test_stop_reason_mapping(stop_reason: str | None, finish_reason: str) -> None:
    body = {**REFERENCE_C, "stop_reason": stop_reason}
    assert AnthropicProvider(api_key=KEY).parse_response(body).finish_reason == finish_reason


def test_calls_mean_tool_calls_whatever_the_stop_reason() -> None:
    body = {**REFERENCE_B, "stop_reason": "max_tokens"}
    assert AnthropicProvider(api_key=KEY).parse_response(body).finish_reason == "tool_calls"


def test_reused_or_missing_ids_get_fresh_ones_and_nameless_calls_are_dropped() -> None:
    body = {
        **REFERENCE_B,
        "content": [
            {"type": "tool_use", "id": ID_A, "name": "get_weather", "input": {"city": "Rome"}},
            {"type": "tool_use", "name": "get_time", "input": None},
            {"type": "tool_use", "id": "toolu_x", "name": "", "input": {}},
            {"type": "tool_use", "id": "toolu_y", "name": "get_time", "input": [1]},
        ],
    }
    response = AnthropicProvider(api_key=KEY).parse_response(body, known_ids={ID_A})
    assert response.tool_calls is not None
    ids = [call.id for call in response.tool_calls]
    assert len(ids) == 3
    assert ID_A not in ids
    assert len(set(ids)) == 3
    assert ids[2] == "toolu_y"
    assert response.tool_calls[1].arguments == {}
    assert response.tool_calls[2].raw_arguments == "[1]"


@pytest.mark.parametrize(
    "body",
    [
        {"content": "text"},
        {"content": [1]},
        {"content": [], "usage": {"input_tokens": "many"}},
        {"content": [], "usage": []},
    ],
)
def test_bodies_we_cannot_understand(body: dict[str, Any]) -> None:
    with pytest.raises(ProviderResponseError):
        AnthropicProvider(api_key=KEY).parse_response(body)


def test_thinking_is_counted_in_the_output_tokens_it_is_billed_in() -> None:
    body = {
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig"},
            {"type": "text", "text": "42"},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 500},
    }
    usage = AnthropicProvider(api_key=KEY).parse_response(body).usage
    assert (usage.completion_tokens, usage.reasoning_tokens, usage.total_tokens) == (500, 0, 510)


# Property: any well-formed history becomes a body the API accepts -----------------------

TEXTS = st.sampled_from(["", " ", "\n", "ok", "Done.\n"]) | st.text(max_size=12)
CALL_IDS = st.text(alphabet="abcXY019_-.:|/ ü", min_size=1, max_size=10)
ARGUMENTS = st.just({}) | st.dictionaries(st.sampled_from(["city", "n"]), st.integers(), max_size=2)


def _history_call(call_id: str) -> st.SearchStrategy[ToolCall]:
    return st.just(ToolCall(call_id, "get_time", raw_arguments="{oops")) | st.builds(
        lambda arguments: ToolCall(call_id, "get_weather", arguments), ARGUMENTS
    )


def histories() -> st.SearchStrategy[list[ChatMessage]]:
    """Turns of calls, each answered (some flagged), then maybe a system, user or answer."""
    return shared_histories(
        texts=TEXTS,
        first_user_texts=st.text(min_size=1, max_size=12).filter(str.strip),
        ids=CALL_IDS,
        calls=_history_call,
        systems=(0, 2),
        rounds=(1, 1),
        turns_per_round=(0, 3),
        calls_per_turn=(1, 3),
        interludes=(Role.SYSTEM, Role.USER, Role.ASSISTANT),
        final_answers=False,
    )


@settings(max_examples=150, deadline=None)
@given(histories())
def test_every_well_formed_history_passes_the_validator(history: list[ChatMessage]) -> None:
    body = build(history, TOOLS, tool_choice="auto")
    sent_calls = [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_use"
    ]
    stored_calls = [call for m in history for call in m.tool_calls or ()]
    assert [block["id"] for block in sent_calls] == [wire_call_id(c.id) for c in stored_calls]
    results = [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == [b["id"] for b in sent_calls]
    # A failed result carries "is_error": true; any other has no such key.
    failed = {m.tool_call_id for m in history if m.is_error}
    assert [r.get("is_error") for r in results] == [
        True if call.id in failed else None for call in stored_calls
    ]


def test_thinking_opens_the_turn_when_an_earlier_text_is_merged_in_front() -> None:
    thinking = {"type": "thinking", "thinking": "Hm.", "signature": "sig"}
    history = reference_history()
    turn = history[2]
    assert turn.tool_calls is not None
    history[2:3] = [
        ChatMessage.assistant("One moment."),
        ChatMessage.assistant_tool_calls(
            turn.tool_calls, provider_metadata={"anthropic": {"thinking_blocks": [thinking]}}
        ),
    ]
    blocks = build(history)["messages"][1]["content"]
    assert [block["type"] for block in blocks] == ["thinking", "text", "tool_use", "tool_use"]


def test_metadata_of_other_providers_is_ignored() -> None:
    history = reference_history()
    turn = history[2]
    assert turn.tool_calls is not None
    history[2] = ChatMessage.assistant_tool_calls(
        turn.tool_calls,
        provider_metadata={"gemini": {"calls": {ID_A: {"thought_signature": "x"}}}},
    )
    assert build(history, TOOLS, max_tokens=1024, tool_choice="auto") == REFERENCE_A


def test_a_merged_final_assistant_turn_loses_trailing_whitespace_too() -> None:
    body = build(
        [ChatMessage.user("Hi"), ChatMessage.assistant("One."), ChatMessage.assistant("Two ")]
    )
    assert body["messages"][-1]["content"][-1] == {"type": "text", "text": "Two"}


def test_unknown_blocks_are_ignored_and_missing_usage_is_zero() -> None:
    body = {
        "model": "claude",
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "text", "text": "Found it."},
        ],
        "stop_reason": "end_turn",
    }
    response = AnthropicProvider(api_key=KEY).parse_response(body)
    assert (response.content, response.tool_calls) == ("Found it.", None)
    assert response.usage.total_tokens == 0
