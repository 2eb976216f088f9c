"""OpenAIProvider and its presets: worked examples of the vendor wire format, mapping rules, parsing."""

from __future__ import annotations

import json
import logging
import re

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    ToolCall,
    ToolSpec,
    Usage,
)
from conversations.exceptions import ProviderResponseError
from conversations.providers.base import CompletionOptions
from conversations.providers.openai import PRESETS, OpenAIProvider, openai_messages
from tests.strategies import histories as shared_histories
from tests.strategies import tool_calls

from .wire_openai import validate_openai_request

KEY = "sk-test-0123456789abcdef"

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather for a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
)
TIME = ToolSpec("get_time", "Get the current local time", {"type": "object", "properties": {}})
TOOLS = (WEATHER, TIME)

# Worked examples of Chat Completions: (a) a request, (b) a calls reply, (c) a text reply.
REFERENCE_REQUEST = json.loads(r"""
{
  "model": "gpt-4o-mini",
  "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What's the weather in Paris, and what time is it?"},
    {
      "role": "assistant",
      "content": null,
      "tool_calls": [
        {
          "id": "call_Wx1aB2cD3eF4gH5iJ6kL7mN8",
          "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}
        },
        {
          "id": "call_Pq9rS8tU7vW6xY5zA4bC3dE2",
          "type": "function",
          "function": {"name": "get_time", "arguments": "{}"}
        }
      ]
    },
    {"role": "tool", "tool_call_id": "call_Wx1aB2cD3eF4gH5iJ6kL7mN8", "content": "{\"temp_c\": 18, \"conditions\": \"cloudy\"}"},
    {"role": "tool", "tool_call_id": "call_Pq9rS8tU7vW6xY5zA4bC3dE2", "content": "2026-08-22T14:05:00+02:00"}
  ],
  "tools": [
    {
      "type": "function",
      "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
          "type": "object",
          "properties": {"city": {"type": "string", "description": "City name"}},
          "required": ["city"]
        }
      }
    },
    {
      "type": "function",
      "function": {
        "name": "get_time",
        "description": "Get the current local time",
        "parameters": {"type": "object", "properties": {}}
      }
    }
  ],
  "tool_choice": "auto",
  "parallel_tool_calls": true
}
""")

REFERENCE_CALLS_RESPONSE = json.loads(r"""
{
  "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
  "object": "chat.completion",
  "created": 1755864300,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": null,
        "tool_calls": [
          {
            "id": "call_Wx1aB2cD3eF4gH5iJ6kL7mN8",
            "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}
          },
          {
            "id": "call_Pq9rS8tU7vW6xY5zA4bC3dE2",
            "type": "function",
            "function": {"name": "get_time", "arguments": "{}"}
          }
        ],
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "tool_calls"
    }
  ],
  "usage": {
    "prompt_tokens": 82,
    "completion_tokens": 45,
    "total_tokens": 127,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_fc9f1d7035"
}
""")

REFERENCE_TEXT_RESPONSE = json.loads(r"""
{
  "id": "chatcmpl-B9MHXkQz1L3mN5pR7tV9xZ2bD4fH6",
  "object": "chat.completion",
  "created": 1755864302,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": "It is 18 °C and cloudy in Paris, and the local time is 14:05.",
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 1180,
    "completion_tokens": 21,
    "total_tokens": 1201,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_fc9f1d7035"
}
""")

ID_WEATHER = "call_Wx1aB2cD3eF4gH5iJ6kL7mN8"
ID_TIME = "call_Pq9rS8tU7vW6xY5zA4bC3dE2"


def reference_history(id_weather: str = ID_WEATHER, id_time: str = ID_TIME) -> list[ChatMessage]:
    """The conversation of worked example (a), as value objects."""
    return [
        ChatMessage.system("You are a helpful assistant."),
        ChatMessage.user("What's the weather in Paris, and what time is it?"),
        ChatMessage.assistant_tool_calls(
            [
                ToolCall(id=id_weather, name="get_weather", arguments={"city": "Paris"}),
                ToolCall(id=id_time, name="get_time"),
            ]
        ),
        ChatMessage.tool_result(id_weather, '{"temp_c": 18, "conditions": "cloudy"}'),
        ChatMessage.tool_result(id_time, "2026-08-22T14:05:00+02:00"),
    ]


def provider(preset: str = "openai", **kwargs: object) -> OpenAIProvider:
    if preset in ("openai_compatible", "azure_openai"):
        kwargs.setdefault("base_url", "https://llm.example.test/v1")
    return OpenAIProvider(api_key=KEY, preset=preset, **kwargs)  # type: ignore[arg-type]


def options(**kwargs: object) -> CompletionOptions:
    kwargs.setdefault("model", "gpt-4o-mini")
    return CompletionOptions(**kwargs)  # type: ignore[arg-type]


def build(
    messages: list[ChatMessage], tools=(), preset: str = "openai", **option_kwargs: object
) -> dict:
    body = provider(preset).build_payload(messages, tools, options(**option_kwargs))
    assert validate_openai_request(body, mistral=preset == "mistral") == []
    return body


def completion(message: dict, **body: object) -> dict:
    """A minimal Chat Completions body around ``message``."""
    return {"model": "m", "choices": [{"index": 0, "message": message, **body}]}


# Worked examples of the wire format (the REFERENCE_* bodies above) ------------------


def test_example_a_request_equals_the_reference() -> None:
    body = build(reference_history(), TOOLS, tool_choice="auto", parallel_tool_calls=True)
    assert body == REFERENCE_REQUEST


def test_example_a_reference_request_passes_the_validator() -> None:
    assert validate_openai_request(REFERENCE_REQUEST) == []


def test_example_b_tool_calls_response() -> None:
    parsed = provider().parse_response(REFERENCE_CALLS_RESPONSE)
    assert parsed == CompletionResponse(
        content="",
        model="gpt-4o-mini-2024-07-18",
        usage=Usage(82, 45, 127, cached_prompt_tokens=0, reasoning_tokens=0),
        finish_reason="tool_calls",
        provider="openai",
        tool_calls=(
            ToolCall(id=ID_WEATHER, name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id=ID_TIME, name="get_time", arguments={}),
        ),
    )


def test_example_c_final_text_with_cached_tokens() -> None:
    parsed = provider().parse_response(REFERENCE_TEXT_RESPONSE)
    assert parsed == CompletionResponse(
        content="It is 18 °C and cloudy in Paris, and the local time is 14:05.",
        model="gpt-4o-mini-2024-07-18",
        usage=Usage(1180, 21, 1201, cached_prompt_tokens=1024),
        finish_reason="stop",
        provider="openai",
    )


def test_parsed_calls_replay_as_the_reference_assistant_turn() -> None:
    turn = provider().parse_response(REFERENCE_CALLS_RESPONSE).to_message()
    history = [*reference_history()[:2], turn, *reference_history()[3:]]
    assert build(history, TOOLS, tool_choice="auto", parallel_tool_calls=True) == REFERENCE_REQUEST


# Transport path, end to end -----------------------------------------------------------


def test_history_reaches_the_http_body_with_calls_and_ids_intact(mock_http, sleeps) -> None:
    recorder = mock_http(httpx.Response(200, json=REFERENCE_TEXT_RESPONSE))
    adapter = OpenAIProvider(api_key=KEY, http_client=recorder.client, sleep=sleeps.append)
    history = [
        ChatMessage.user("Weather and time in Paris?"),
        ChatMessage.assistant_tool_calls(
            [
                ToolCall(id="call_a1", name="get_weather", arguments={"city": "Paris"}),
                ToolCall(id="call_b2", name="get_time"),
            ],
            "Let me check.",
        ),
        ChatMessage.tool_result("call_a1", '{"temp_c": 18}'),
        ChatMessage.tool_result("call_b2", "14:05"),
    ]

    result = adapter.complete(history, tools=TOOLS, options=options())

    (request,) = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    body = json.loads(request.content)
    assert validate_openai_request(body) == []
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_a1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "call_b2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "content": '{"temp_c": 18}', "tool_call_id": "call_a1"},
        {"role": "tool", "content": "14:05", "tool_call_id": "call_b2"},
    ]
    assert result.content.startswith("It is 18 °C")
    assert sleeps == []


def test_complete_gives_fresh_ids_when_the_response_reuses_history_ids(mock_http) -> None:
    recorder = mock_http(httpx.Response(200, json=REFERENCE_CALLS_RESPONSE))
    adapter = OpenAIProvider(api_key=KEY, http_client=recorder.client)

    result = adapter.complete(reference_history(), tools=TOOLS, options=options())

    assert result.tool_calls is not None
    new_ids = {call.id for call in result.tool_calls}
    assert len(new_ids) == 2
    assert not new_ids & {ID_WEATHER, ID_TIME}


# Request mapping ----------------------------------------------------------------------


def test_no_tool_keys_when_no_tools_are_offered() -> None:
    body = build(reference_history(), (), tool_choice="required", parallel_tool_calls=False)
    assert "tools" not in body
    assert "tool_choice" not in body
    assert "parallel_tool_calls" not in body


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_time", {"type": "function", "function": {"name": "get_time"}}),
    ],
)
def test_tool_choice(choice: str, expected: object) -> None:
    body = build([ChatMessage.user("hi")], TOOLS, tool_choice=choice)
    assert body["tool_choice"] == expected
    assert "parallel_tool_calls" not in body


def test_tool_choice_naming_a_tool_not_offered_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        provider().build_payload([ChatMessage.user("hi")], TOOLS, options(tool_choice="nope"))
    assert info.value.code == "unknown_tool_choice"


def test_parallel_tool_calls_false_is_sent() -> None:
    body = build([ChatMessage.user("hi")], TOOLS, parallel_tool_calls=False)
    assert body["parallel_tool_calls"] is False
    assert "tool_choice" not in body


def test_sampling_keys_and_extra_last() -> None:
    body = build(
        [ChatMessage.user("hi")],
        temperature=0.2,
        max_tokens=256,
        stop=("END",),
        extra={"seed": 7, "temperature": 0.5},
    )
    assert body["max_completion_tokens"] == 256
    assert "max_tokens" not in body
    assert body["stop"] == ["END"]
    assert body["seed"] == 7
    assert body["temperature"] == 0.5  # extra wins: it is merged last


def test_defaults_send_no_sampling_keys() -> None:
    body = build([ChatMessage.user("hi")])
    assert body == {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    "preset", ["openai_compatible", "mistral", "groq", "openrouter", "together", "fireworks"]
)
def test_compatible_presets_send_max_tokens(preset: str) -> None:
    body = build([ChatMessage.user("hi")], preset=preset, max_tokens=64)
    assert body["max_tokens"] == 64
    assert "max_completion_tokens" not in body


def test_assistant_text_beside_calls_is_kept_and_empty_text_is_null() -> None:
    calls = [ToolCall(id="call_1", name="get_time")]
    with_text = build(
        [
            ChatMessage.user("t?"),
            ChatMessage.assistant_tool_calls(calls, "Checking."),
            ChatMessage.tool_result("call_1", "12:00"),
        ]
    )
    without = build(
        [
            ChatMessage.user("t?"),
            ChatMessage.assistant_tool_calls(calls),
            ChatMessage.tool_result("call_1", "12:00"),
        ]
    )
    assert with_text["messages"][1]["content"] == "Checking."
    assert without["messages"][1]["content"] is None


def test_a_plain_empty_assistant_message_keeps_its_string_content() -> None:
    # null is only allowed beside tool_calls.
    body = build([ChatMessage.user("hi"), ChatMessage.assistant(""), ChatMessage.user("again")])
    assert body["messages"][1] == {"role": "assistant", "content": ""}


def test_raw_arguments_are_replayed_verbatim() -> None:
    broken = '{"city": "Par'
    body = build(
        [
            ChatMessage.user("w?"),
            ChatMessage.assistant_tool_calls(
                [ToolCall(id="call_1", name="get_weather", raw_arguments=broken)]
            ),
            ChatMessage.tool_result("call_1", "error: arguments are not valid JSON"),
        ]
    )
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == broken


def test_several_system_messages_are_all_kept_in_order() -> None:
    body = build(
        [
            ChatMessage.system("one"),
            ChatMessage.user("hi"),
            ChatMessage.system("two"),
            ChatMessage.user("again"),
        ]
    )
    assert [m["content"] for m in body["messages"] if m["role"] == "system"] == ["one", "two"]


def test_messages_carry_only_standard_keys() -> None:
    # Groq refuses unknown message properties; nothing beyond the schema may leak.
    body = build(reference_history(), TOOLS, preset="groq")
    for message in body["messages"]:
        assert set(message) <= {"role", "content", "tool_calls", "tool_call_id"}
        for call in message.get("tool_calls", []):
            assert set(call) == {"id", "type", "function"}
            assert set(call["function"]) == {"name", "arguments"}


def test_a_tool_result_answering_no_earlier_call_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        provider().build_payload(
            [ChatMessage.user("hi"), ChatMessage.tool_result("call_x", "?")], (), options()
        )
    assert info.value.code == "unknown_tool_call_id"
    assert info.value.field == "1/tool_call_id"


def test_a_tool_message_without_call_id_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        provider().build_payload([ChatMessage.user("hi"), ChatMessage.tool("?")], (), options())
    assert info.value.code == "missing_tool_call_id"


@pytest.mark.parametrize("preset", sorted(set(PRESETS) - {"mistral"}))
def test_overlong_ids_are_shortened_consistently(preset: str) -> None:
    long_id = "toolu_" + "x" * 60
    body = build(reference_history(id_weather=long_id), preset=preset)
    alias = body["messages"][2]["tool_calls"][0]["id"]
    assert len(alias) <= 40
    assert body["messages"][3]["tool_call_id"] == alias
    assert body["messages"][2]["tool_calls"][1]["id"] == ID_TIME  # short ids are kept


def test_two_ids_mapping_to_one_wire_id_are_refused() -> None:
    # Practically impossible with the presets' hashes, but pairing would break silently.
    with pytest.raises(InvalidArgumentError) as info:
        openai_messages(reference_history(), wire_id=lambda call_id: "same")
    assert info.value.code == "call_id_collision"
    assert info.value.field == "2/tool_calls/1/id"


# Mistral --------------------------------------------------------------------------------


def test_mistral_ids_are_rewritten_to_nine_characters_consistently() -> None:
    body = build(reference_history(), TOOLS, preset="mistral")
    call_ids = [call["id"] for call in body["messages"][2]["tool_calls"]]
    result_ids = [m["tool_call_id"] for m in body["messages"][3:]]
    assert call_ids == result_ids
    assert all(re.fullmatch(r"[a-zA-Z0-9]{9}", i) for i in call_ids)
    assert len(set(call_ids)) == 2
    assert ID_WEATHER not in json.dumps(body)
    # Deterministic: the next request of the conversation uses the same ids.
    assert build(reference_history(), TOOLS, preset="mistral") == body


def test_mistral_keeps_its_own_ids_and_they_survive_a_round_trip() -> None:
    mistral = provider("mistral")
    parsed = mistral.parse_response(
        completion(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "D681PevKs",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    }
                ],
            },
            finish_reason="tool_calls",
        )
    )
    assert parsed.provider == "mistral"
    assert parsed.tool_calls == (ToolCall(id="D681PevKs", name="get_time"),)
    history = [
        ChatMessage.user("t?"),
        parsed.to_message(),
        ChatMessage.tool_result("D681PevKs", "12:00"),
    ]
    body = build(history, TOOLS, preset="mistral")
    assert body["messages"][1]["tool_calls"][0]["id"] == "D681PevKs"
    assert body["messages"][2]["tool_call_id"] == "D681PevKs"


def test_the_validator_catches_foreign_ids_for_mistral() -> None:
    problems = validate_openai_request(REFERENCE_REQUEST, mistral=True)
    assert len(problems) == 4  # two calls, two results
    assert all("Mistral" in problem for problem in problems)


# Presets, URLs and headers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "url"),
    [
        ("openai", "https://api.openai.com/v1/chat/completions"),
        ("mistral", "https://api.mistral.ai/v1/chat/completions"),
        ("groq", "https://api.groq.com/openai/v1/chat/completions"),
        ("openrouter", "https://openrouter.ai/api/v1/chat/completions"),
        ("together", "https://api.together.xyz/v1/chat/completions"),
        ("fireworks", "https://api.fireworks.ai/inference/v1/chat/completions"),
    ],
)
def test_preset_urls_and_bearer_auth(mock_http, preset: str, url: str) -> None:
    recorder = mock_http(httpx.Response(200, json=REFERENCE_TEXT_RESPONSE))
    adapter = OpenAIProvider(api_key=KEY, preset=preset, http_client=recorder.client)

    result = adapter.complete([ChatMessage.user("hi")], options=options())

    (request,) = recorder.requests
    assert str(request.url) == url
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert result.provider == preset
    assert adapter.preset is PRESETS[preset]


def test_custom_base_url_for_any_compatible_server(mock_http) -> None:
    recorder = mock_http(httpx.Response(200, json=REFERENCE_TEXT_RESPONSE))
    adapter = OpenAIProvider(
        api_key=KEY,
        preset="openai_compatible",
        base_url="http://vllm.internal:8000/v1/",
        http_client=recorder.client,
    )
    assert adapter.complete([ChatMessage.user("hi")], options=options()).provider == (
        "openai_compatible"
    )
    assert str(recorder.requests[0].url) == "http://vllm.internal:8000/v1/chat/completions"


@pytest.mark.parametrize("preset", ["openai_compatible", "azure_openai"])
def test_presets_without_a_public_endpoint_need_a_base_url(preset: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        OpenAIProvider(api_key=KEY, preset=preset)
    assert info.value.code == "missing_base_url"


def test_unknown_preset_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        OpenAIProvider(api_key=KEY, preset="anthropic")
    assert info.value.code == "unknown_preset"


def test_the_key_is_required() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        OpenAIProvider(preset="groq")
    assert info.value.code == "missing_api_key"


def test_azure_url_header_and_api_version(mock_http) -> None:
    recorder = mock_http(httpx.Response(200, json=REFERENCE_TEXT_RESPONSE))
    adapter = OpenAIProvider(
        api_key=KEY,
        preset="azure_openai",
        base_url="https://myres.openai.azure.com/",
        http_client=recorder.client,
    )

    result = adapter.complete(
        [ChatMessage.user("hi")], options=options(model="gpt4o-prod", max_tokens=10)
    )

    (request,) = recorder.requests
    assert request.url.path == "/openai/deployments/gpt4o-prod/chat/completions"
    assert request.url.host == "myres.openai.azure.com"
    assert dict(request.url.params) == {"api-version": "2024-10-21"}
    assert request.headers["api-key"] == KEY
    assert "authorization" not in request.headers
    assert KEY not in str(request.url)
    assert json.loads(request.content)["max_completion_tokens"] == 10
    assert result.provider == "azure_openai"


def test_azure_api_version_can_be_chosen(mock_http) -> None:
    recorder = mock_http(httpx.Response(200, json=REFERENCE_TEXT_RESPONSE))
    adapter = OpenAIProvider(
        api_key=KEY,
        preset="azure_openai",
        base_url="https://myres.openai.azure.com",
        api_version="2025-04-01-preview",
        http_client=recorder.client,
    )
    adapter.complete([ChatMessage.user("hi")], options=options(model="dep"))
    assert recorder.requests[0].url.params["api-version"] == "2025-04-01-preview"


@pytest.mark.parametrize("deployment", ["a/b", "..", ".", "x?y=1", "dep name", "dé"])
def test_azure_deployment_names_are_validated_before_any_request(
    mock_http, deployment: str
) -> None:
    recorder = mock_http(httpx.Response(200, json=REFERENCE_TEXT_RESPONSE))
    adapter = provider("azure_openai", http_client=recorder.client)
    with pytest.raises(InvalidArgumentError) as info:
        adapter.complete([ChatMessage.user("hi")], options=options(model=deployment))
    assert info.value.code == "invalid_model"
    assert recorder.requests == []


def test_api_version_is_validated_and_only_for_azure() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        provider("azure_openai", api_version="2024&x=1")
    assert info.value.code == "invalid_api_version"
    with pytest.raises(InvalidArgumentError) as info:
        provider("openai", api_version="2024-10-21")
    assert info.value.code == "unexpected_api_version"


# Response parsing --------------------------------------------------------------------


def test_null_content_is_empty_text() -> None:
    parsed = provider().parse_response(completion({"role": "assistant", "content": None}))
    assert parsed.content == ""
    assert parsed.tool_calls is None
    assert parsed.finish_reason == "stop"
    assert parsed.usage == Usage()


def test_a_refusal_is_kept_as_the_content() -> None:
    message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    parsed = provider().parse_response(completion(message, finish_reason="stop"))
    assert parsed.content == "I can't help with that."


@pytest.mark.parametrize("preset", ["openai_compatible", "mistral"])
def test_a_refusal_part_is_kept_by_compatible_servers_too(preset: str) -> None:
    parts = [{"type": "refusal", "refusal": "No."}]
    parsed = provider(preset).parse_response(completion({"role": "assistant", "content": parts}))
    assert parsed.content == "No."


def test_text_wins_over_a_null_refusal() -> None:
    message = {"role": "assistant", "content": "Hello", "refusal": None}
    assert provider().parse_response(completion(message)).content == "Hello"


def test_an_error_result_has_no_flag_on_the_openai_wire() -> None:
    history = reference_history()[:4]
    history.append(ChatMessage.tool_result(ID_TIME, "ConnectionError: down", is_error=True))
    last = build(history)["messages"][-1]
    assert last == {"role": "tool", "tool_call_id": ID_TIME, "content": "ConnectionError: down"}


def test_temperature_follows_the_models_sampling_parameters() -> None:
    assert build([ChatMessage.user("hi")], temperature=0.4)["temperature"] == 0.4
    body = build([ChatMessage.user("hi")], temperature=0.4, sampling_parameters=frozenset())
    assert "temperature" not in body


def _calls_message(*calls: dict) -> dict:
    return completion({"role": "assistant", "content": None, "tool_calls": list(calls)})


def _call(call_id: str | None, name: str | None, arguments: object = "{}") -> dict:
    call: dict = {"type": "function", "function": {"arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
    if name is not None:
        call["function"]["name"] = name
    return call


def test_missing_and_duplicate_ids_get_fresh_unique_ones() -> None:
    parsed = provider().parse_response(
        _calls_message(
            _call(None, "a"), _call("call_1", "b"), _call("call_1", "c"), _call("old", "d")
        ),
        known_ids={"old"},
    )
    assert parsed.tool_calls is not None
    ids = [call.id for call in parsed.tool_calls]
    assert ids[1] == "call_1"
    assert len(set(ids)) == 4
    assert "old" not in ids
    assert [call.name for call in parsed.tool_calls] == ["a", "b", "c", "d"]


def test_a_call_without_a_name_is_dropped_with_a_warning(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="conversations.providers")
    parsed = provider("groq").parse_response(
        _calls_message(_call("c1", None), _call("c2", ""), "not an object", _call("c3", "ok"))
    )
    assert parsed.tool_calls == (ToolCall(id="c3", name="ok"),)
    assert parsed.finish_reason == "tool_calls"
    assert caplog.text.count("without a name") == 3
    assert "groq" in caplog.text


def test_when_every_call_is_dropped_the_turn_is_a_plain_stop(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="conversations.providers")
    body = _calls_message(_call("c1", None))
    body["choices"][0]["finish_reason"] = "tool_calls"
    parsed = provider().parse_response(body)
    assert parsed.tool_calls is None
    assert parsed.finish_reason == "stop"


@pytest.mark.parametrize(
    ("arguments", "decoded", "raw"),
    [
        ('{"city":"Paris"}', {"city": "Paris"}, None),
        ("{}", {}, None),
        ("", {}, None),
        (None, {}, None),
        ('{"city": "Par', {}, '{"city": "Par'),
        ("[1, 2]", {}, "[1, 2]"),
        ('"text"', {}, '"text"'),
        ("NaN", {}, "NaN"),
    ],
)
def test_arguments_that_are_not_an_object_are_kept_raw(
    arguments: object, decoded: dict, raw: str | None
) -> None:
    parsed = provider().parse_response(_calls_message(_call("c1", "f", arguments)))
    assert parsed.tool_calls == (ToolCall(id="c1", name="f", arguments=decoded, raw_arguments=raw),)


def test_calls_make_the_finish_reason_tool_calls_whatever_the_server_says() -> None:
    body = _calls_message(_call("c1", "f"))
    body["choices"][0]["finish_reason"] = "stop"
    assert provider("together").parse_response(body).finish_reason == "tool_calls"


@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_other_finish_reasons_pass_through(reason: str) -> None:
    body = completion({"role": "assistant", "content": "cut"}, finish_reason=reason)
    assert provider().parse_response(body).finish_reason == reason


def test_usage_with_reasoning_and_missing_details() -> None:
    body = completion({"role": "assistant", "content": "x"})
    body["usage"] = {
        "prompt_tokens": 10,
        "completion_tokens": 30,
        "completion_tokens_details": {"reasoning_tokens": 20},
        "prompt_tokens_details": None,
    }
    assert provider().parse_response(body).usage == Usage(10, 30, 40, 0, 20)


def test_text_parts_are_joined_and_reasoning_is_thinking() -> None:
    parsed = provider("mistral").parse_response(
        completion(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "you"}],
                "reasoning_content": "The user greets me.",
            }
        )
    )
    assert parsed.content == "Hello you"
    assert parsed.thinking == "The user greets me."


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "m"}, "openai: the response has no choices"),
        ({"model": "m", "choices": []}, "openai: the response has no choices"),
        ({"error": {"message": "upstream failed"}}, "upstream failed"),
        ({"choices": [{"index": 0}]}, "the first choice has no message"),
        ({"choices": ["x"]}, "the first choice has no message"),
        (completion({"content": 3}), "message content is neither text nor parts"),
        (completion({"content": "", "tool_calls": {}}), "tool_calls is not a list"),
        ({**completion({"content": ""}), "usage": {"prompt_tokens": "7"}}, "not a count"),
        ({**completion({"content": ""}), "usage": []}, "usage is not an object"),
        (
            {**completion({"content": ""}), "usage": {"prompt_tokens_details": 1}},
            "usage details are not objects",
        ),
    ],
)
def test_bodies_we_cannot_understand(body: dict, message: str) -> None:
    with pytest.raises(ProviderResponseError, match=re.escape(message)):
        provider().parse_response(body)


def test_an_error_in_a_2xx_body_is_redacted() -> None:
    with pytest.raises(ProviderResponseError) as info:
        provider().parse_response({"error": {"message": f"bad key {KEY}"}})
    assert KEY not in str(info.value)


# Any valid history builds a valid body -------------------------------------------------

_id_chars = st.characters(codec="ascii", categories=("L", "N", "P"))
# Foreign ids: short ones, and long ones that must be shortened for OpenAI-style wires.
_ids = st.text(_id_chars, min_size=1, max_size=12) | st.text(_id_chars, min_size=41, max_size=80)
_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_-]{0,20}", fullmatch=True)
_arguments = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3)
_raw = st.sampled_from(['{"a": ', "[1]", "not json", '"x"'])


def _history_call(call_id: str) -> st.SearchStrategy[ToolCall]:
    return tool_calls(st.just(call_id), _names, _arguments, _raw)


def histories() -> st.SearchStrategy[list[ChatMessage]]:
    """Conversations with several rounds of parallel calls (some with raw arguments)."""
    return shared_histories(
        texts=st.text(max_size=10),
        ids=_ids,
        calls=_history_call,
        systems=(1, 1),
        turns_per_round=(0, 1),
        calls_per_turn=(1, 3),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), preset=st.sampled_from(sorted(PRESETS)))
def test_any_valid_history_builds_a_valid_body_for_every_preset(
    history: list[ChatMessage], preset: str
) -> None:
    body = provider(preset).build_payload(history, TOOLS, options(tool_choice="auto"))
    assert validate_openai_request(body, mistral=preset == "mistral") == []
    wire_calls = [c for m in body["messages"] for c in m.get("tool_calls", [])]
    stored_calls = [c for m in history if m.tool_calls for c in m.tool_calls]
    assert [c["function"]["arguments"] for c in wire_calls] == [
        c.arguments_json for c in stored_calls
    ]
    # Chat Completions has no error flag: a failed result is sent as its text alone.
    results = [m for m in body["messages"] if m["role"] == "tool"]
    assert len(results) == len([m for m in history if m.role == "tool"])
    assert all("is_error" not in m and "error" not in m for m in results)


# The validator itself ----------------------------------------------------------------------


def _broken(change) -> dict:
    body = json.loads(json.dumps(REFERENCE_REQUEST))
    change(body)
    return body


def _user_tool_calls(body: dict) -> None:
    body["messages"][1]["tool_calls"] = body["messages"][2]["tool_calls"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda b: b.update(tools=[]), "tools: must be a non-empty array"),
        (lambda b: b["messages"][2].update(tool_calls=[]), "tool_calls: must be a non-empty"),
        (
            lambda b: b["messages"][2]["tool_calls"][0]["function"].update(arguments={}),
            "arguments: must be a JSON string",
        ),
        (
            lambda b: b["messages"][2]["tool_calls"][0]["function"].update(name=""),
            "function.name: a non-empty string is required",
        ),
        (lambda b: b["messages"].pop(4), "were never answered"),
        (lambda b: b["messages"].insert(4, {"role": "user", "content": "x"}), "not answered"),
        (lambda b: b["messages"].pop(2), "answers no call of the preceding turn"),
        (lambda b: b["messages"].append(b["messages"][4]), "answered twice"),
        (lambda b: b.pop("tools"), "tool_choice: only allowed when tools are specified"),
        (lambda b: b.pop("tools"), "parallel_tool_calls: only allowed when tools"),
        (lambda b: b["messages"][0].update(content=[]), "needs at least one part"),
        (lambda b: b["messages"][4].pop("tool_call_id"), "tool_call_id: a non-empty string"),
        (lambda b: b["messages"][2]["tool_calls"][0].pop("type"), 'type: must be "function"'),
        (lambda b: b["messages"][2]["tool_calls"][0].update(id="c" * 41), "longer than 40"),
        (
            lambda b: b["messages"][2]["tool_calls"][1].update(id=ID_WEATHER),
            "appears twice in one turn",
        ),
        (
            lambda b: b["messages"][2]["tool_calls"][0]["function"].update(raw_arguments="x"),
            "unexpected keys ['raw_arguments']",
        ),
        (lambda b: b["messages"][1].update(tool_name="x"), "unexpected keys ['tool_name']"),
        (_user_tool_calls, "unexpected keys ['tool_calls']"),
        (lambda b: b["messages"][1].pop("content"), "content: required"),
        (lambda b: b["messages"].append({"role": "assistant", "content": None}), "required when"),
        (lambda b: b["messages"][0].update(role="robot"), "is not a valid role"),
        (lambda b: b["tools"][0]["function"].update(name="bad name"), "must match"),
        (lambda b: b["tools"].append(b["tools"][0]), "declared twice"),
        (lambda b: b.update(tool_choice="any"), "is not one of"),
        (
            lambda b: b.update(tool_choice={"type": "function", "function": {"name": "x"}}),
            "which is not a declared tool",
        ),
        (lambda b: b.update(parallel_tool_calls="yes"), "must be a boolean"),
        (lambda b: b.update(messages=[]), "messages: a non-empty array"),
        (lambda b: b.pop("model"), "model: a non-empty string"),
    ],
)
def test_the_validator_catches_each_rule(change, problem: str) -> None:
    problems = validate_openai_request(_broken(change))
    assert any(problem in p for p in problems), problems


def test_errors_name_the_preset() -> None:
    with pytest.raises(ProviderResponseError, match=r"^mistral: usage is not an object"):
        provider("mistral").parse_response({**completion({"content": ""}), "usage": 3})
