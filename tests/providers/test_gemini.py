"""GeminiProvider: worked examples of the vendor wire format, the conversion rules, and HTTP.

No network: every exchange goes through ``httpx.MockTransport``, and every
request body built here is checked by ``validate_gemini_request``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.domain import ChatMessage, InvalidArgumentError, Role, ToolCall, ToolSpec
from conversations.exceptions import (
    ProviderResponseError,
)
from conversations.providers.base import CompletionOptions
from conversations.providers.gemini import GeminiProvider, gemini_function_name
from conversations.providers.gemini_schema import gemini_parameters
from tests.providers.mock_http import Reply, provider_with_replies
from tests.providers.wire_gemini import FUNCTION_NAME_PATTERN, validate_gemini_request
from tests.strategies import histories as shared_histories

KEY = "AIzaSyTest-0123456789abcdef"

# Worked examples in the generateContent shape: requests, a calls reply, a text reply.
REFERENCE_A1 = json.loads(
    r"""
{
  "systemInstruction": {"parts": [{"text": "You are a helpful assistant."}]},
  "contents": [
    {"role": "user", "parts": [{"text": "What's the weather in Paris, and what time is it?"}]},
    {
      "role": "model",
      "parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
        {"functionCall": {"name": "get_time", "args": {}}}
      ]
    },
    {
      "role": "user",
      "parts": [
        {"functionResponse": {"name": "get_weather", "response": {"output": "{\"temp_c\": 18, \"conditions\": \"cloudy\"}"}}},
        {"functionResponse": {"name": "get_time", "response": {"output": "2026-08-22T14:05:00+02:00"}}}
      ]
    }
  ],
  "tools": [
    {
      "functionDeclarations": [
        {
          "name": "get_weather",
          "description": "Get the current weather for a city",
          "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"]
          }
        },
        {"name": "get_time", "description": "Get the current local time"}
      ]
    }
  ],
  "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}
}
"""
)

REFERENCE_A2 = json.loads(
    r"""
{
  "systemInstruction": {"parts": [{"text": "You are a helpful assistant."}]},
  "contents": [
    {"role": "user", "parts": [{"text": "What's the weather in Paris, and what time is it?"}]},
    {
      "role": "model",
      "parts": [
        {"functionCall": {"id": "esrym5y5", "name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnbmF0dXJlLWZvci1zdGVwLTE="},
        {"functionCall": {"id": "k2p9x7qa", "name": "get_time", "args": {}}}
      ]
    },
    {
      "role": "user",
      "parts": [
        {"functionResponse": {"id": "esrym5y5", "name": "get_weather", "response": {"output": "{\"temp_c\": 18, \"conditions\": \"cloudy\"}"}}},
        {"functionResponse": {"id": "k2p9x7qa", "name": "get_time", "response": {"output": "2026-08-22T14:05:00+02:00"}}}
      ]
    }
  ],
  "tools": [
    {
      "functionDeclarations": [
        {
          "name": "get_weather",
          "description": "Get the current weather for a city",
          "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"]
          }
        },
        {"name": "get_time", "description": "Get the current local time"}
      ]
    }
  ],
  "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}
}
"""
)

REFERENCE_B = json.loads(
    r"""
{
  "candidates": [
    {
      "content": {
        "role": "model",
        "parts": [
          {"functionCall": {"id": "esrym5y5", "name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnbmF0dXJlLWZvci1zdGVwLTE="},
          {"functionCall": {"id": "k2p9x7qa", "name": "get_time", "args": {}}}
        ]
      },
      "finishReason": "STOP",
      "index": 0
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 96,
    "candidatesTokenCount": 24,
    "thoughtsTokenCount": 58,
    "totalTokenCount": 178,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 96}]
  },
  "modelVersion": "gemini-3-flash-preview",
  "responseId": "mUOoaJqbC9mXz7IP4Kq1oAc"
}
"""
)

REFERENCE_C = json.loads(
    r"""
{
  "candidates": [
    {
      "content": {
        "role": "model",
        "parts": [{"text": "It is 18 °C and cloudy in Paris, and the local time is 14:05."}]
      },
      "finishReason": "STOP",
      "index": 0
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 1180,
    "cachedContentTokenCount": 1024,
    "candidatesTokenCount": 21,
    "totalTokenCount": 1201,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1180}],
    "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 1024}]
  },
  "modelVersion": "gemini-2.5-flash",
  "responseId": "nUOoaKzD4b7Xz7IP1dG9wAo"
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
WEATHER_RESULT = '{"temp_c": 18, "conditions": "cloudy"}'
TIME_RESULT = "2026-08-22T14:05:00+02:00"
SIGNATURE = "c2lnbmF0dXJlLWZvci1zdGVwLTE="
URL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"


def with_object_results_as_they_are(reference: dict[str, Any]) -> dict[str, Any]:
    """The worked example request, with the one rule where this adapter differs from it.

    The worked example wraps every result as ``{"output": text}``; the adapter sends
    a result that is a JSON object as the response itself (Gemini reads a
    response without "output"/"error" keys as the whole output).
    """
    expected = copy.deepcopy(reference)
    response = expected["contents"][2]["parts"][0]["functionResponse"]
    response["response"] = {"temp_c": 18, "conditions": "cloudy"}
    return expected


def reference_history(
    id_a: str = "call_weather", id_b: str = "call_time", turn: ChatMessage | None = None
) -> list[ChatMessage]:
    """The conversation of example (a), built the way the tool loop builds it."""
    if turn is None:
        turn = ChatMessage.assistant_tool_calls(
            [ToolCall(id_a, "get_weather", {"city": "Paris"}), ToolCall(id_b, "get_time")]
        )
    assert turn.tool_calls is not None
    first, second = turn.tool_calls
    return [
        ChatMessage.system("You are a helpful assistant."),
        ChatMessage.user("What's the weather in Paris, and what time is it?"),
        turn,
        ChatMessage.tool_result(first.id, WEATHER_RESULT),
        ChatMessage.tool_result(second.id, TIME_RESULT),
    ]


def options(**kwargs: Any) -> CompletionOptions:
    kwargs.setdefault("model", "gemini-2.5-flash")
    return CompletionOptions(**kwargs)


def build(
    messages: list[ChatMessage], tools: tuple[ToolSpec, ...] = (), **kwargs: Any
) -> dict[str, Any]:
    """build_payload, with the body checked against the 400 table."""
    body = GeminiProvider(api_key=KEY).build_payload(messages, tools, options(**kwargs))
    assert validate_gemini_request(body) == []
    return body


def parse(body: dict[str, Any], known_ids: tuple[str, ...] = ()) -> Any:
    return GeminiProvider(api_key=KEY).parse_response(body, known_ids=known_ids)


def mock_provider(
    *outcomes: Reply, **kwargs: Any
) -> tuple[GeminiProvider, list[httpx.Request], list[float]]:
    """A GeminiProvider whose client answers with ``outcomes`` in turn."""
    return provider_with_replies(
        GeminiProvider, *outcomes, api_key=kwargs.pop("api_key", KEY), **kwargs
    )


def sent(request: httpx.Request) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(request.content)
    assert validate_gemini_request(body) == []
    return body


# Worked examples of the wire format (the REFERENCE_* bodies above) ------------------


def test_reference_request_a1_history_without_native_ids() -> None:
    body = build(reference_history(), TOOLS, tool_choice="auto")
    assert body == with_object_results_as_they_are(REFERENCE_A1)


def test_the_reference_wrapping_applies_to_every_non_object_result() -> None:
    history = reference_history()
    history[3] = ChatMessage.tool_result("call_weather", "18 degrees")
    body = build(history, TOOLS, tool_choice="auto")
    response = body["contents"][2]["parts"][0]["functionResponse"]["response"]
    assert response == {"output": "18 degrees"}


def test_reference_response_b_parses_native_ids_signature_and_usage() -> None:
    response = parse(REFERENCE_B)
    assert response.content == ""
    assert response.finish_reason == "tool_calls"  # although Gemini said STOP
    assert response.provider == "gemini"
    assert response.model == "gemini-3-flash-preview"
    assert response.tool_calls is not None
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("esrym5y5", "get_weather", {"city": "Paris"}),
        ("k2p9x7qa", "get_time", {}),
    ]
    assert [c.arguments_json for c in response.tool_calls] == ['{"city":"Paris"}', "{}"]
    assert response.usage.to_dict() == {
        "prompt_tokens": 96,
        "completion_tokens": 82,
        "total_tokens": 178,
        "cached_prompt_tokens": 0,
        "reasoning_tokens": 58,
    }
    assert response.provider_metadata == {
        "gemini": {
            "calls": {
                "esrym5y5": {"id": "esrym5y5", "thought_signature": SIGNATURE},
                "k2p9x7qa": {"id": "k2p9x7qa"},
            }
        }
    }


def test_reference_request_a2_replays_ids_and_signature_from_response_b() -> None:
    turn = parse(REFERENCE_B).to_message()
    body = build(reference_history(turn=turn), TOOLS, tool_choice="auto")
    assert body == with_object_results_as_they_are(REFERENCE_A2)


def test_reference_response_c_final_text_with_cached_usage() -> None:
    response = parse(REFERENCE_C)
    assert response.content == "It is 18 °C and cloudy in Paris, and the local time is 14:05."
    assert response.finish_reason == "stop"
    assert response.tool_calls is None
    assert response.model == "gemini-2.5-flash"
    assert response.usage.prompt_tokens == 1180
    assert response.usage.cached_prompt_tokens == 1024
    assert response.usage.completion_tokens == 21
    assert response.usage.total_tokens == 1201
    assert response.provider_metadata == {}


# End to end through the transport -----------------------------------------------------


def test_history_reaches_the_http_body_with_calls_and_results_intact() -> None:
    provider, requests, _ = mock_provider(httpx.Response(200, json=REFERENCE_C))
    response = provider.complete(
        reference_history(id_a="call.other:1"), tools=TOOLS, options=options(tool_choice="auto")
    )
    assert response.content.startswith("It is 18")
    (request,) = requests
    assert str(request.url) == URL
    assert request.headers["x-goog-api-key"] == KEY
    assert sent(request) == with_object_results_as_they_are(
        REFERENCE_A1
    )  # ids of other providers stay home


def test_native_ids_and_signature_survive_two_rounds_through_the_transport() -> None:
    provider, requests, _ = mock_provider(
        httpx.Response(200, json=REFERENCE_B), httpx.Response(200, json=REFERENCE_C)
    )
    history = reference_history()[:2]
    first = provider.complete(history, tools=TOOLS, options=options(tool_choice="auto"))
    assert first.tool_calls is not None
    history = reference_history(turn=first.to_message())
    provider.complete(history, tools=TOOLS, options=options(tool_choice="auto"))
    assert sent(requests[1]) == with_object_results_as_they_are(REFERENCE_A2)


def test_a_reused_native_id_gets_a_fresh_id_but_replays_the_native_one() -> None:
    response = parse(REFERENCE_B, known_ids=("esrym5y5",))
    assert response.tool_calls is not None
    ours = response.tool_calls[0].id
    assert ours != "esrym5y5"
    assert response.provider_metadata["gemini"]["calls"][ours]["id"] == "esrym5y5"
    body = build(reference_history(turn=response.to_message()), TOOLS)
    assert body["contents"][1]["parts"][0]["functionCall"]["id"] == "esrym5y5"
    assert body["contents"][2]["parts"][0]["functionResponse"]["id"] == "esrym5y5"


# Conversion rules ----------------------------------------------------------------------


def test_several_system_messages_are_joined_in_order() -> None:
    body = build(
        [
            ChatMessage.system("First rule."),
            ChatMessage.user("Hi"),
            ChatMessage.system("Second rule."),
            ChatMessage.system(" "),
        ]
    )
    assert body["systemInstruction"] == {"parts": [{"text": "First rule.\n\nSecond rule."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]}]


def test_no_optional_keys_when_there_is_nothing_for_them() -> None:
    body = build([ChatMessage.user("Hi")], tool_choice="required")
    assert body == {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}


def test_raw_arguments_and_empty_arguments_go_out_as_an_empty_object() -> None:
    turn = ChatMessage.assistant_tool_calls(
        [ToolCall("a", "get_weather", raw_arguments="[1, 2]"), ToolCall("b", "get_time")]
    )
    parts = build(reference_history(turn=turn))["contents"][1]["parts"]
    assert [part["functionCall"]["args"] for part in parts] == [{}, {}]


def test_results_form_one_content_in_call_order_and_user_text_follows() -> None:
    history = reference_history()
    history[3], history[4] = history[4], history[3]
    history.append(ChatMessage.user("And tomorrow?"))
    contents = build(history, TOOLS)["contents"]
    assert [p["functionResponse"]["name"] for p in contents[2]["parts"]] == [
        "get_weather",
        "get_time",
    ]
    assert contents[3] == {"role": "user", "parts": [{"text": "And tomorrow?"}]}


def test_model_text_before_calls_is_one_call_turn() -> None:
    history = reference_history()
    history.insert(2, ChatMessage.assistant("Let me check."))
    history[3] = ChatMessage.assistant_tool_calls(
        [
            ToolCall("call_weather", "get_weather", {"city": "Paris"}),
            ToolCall("call_time", "get_time"),
        ],
        "Two lookups.",
    )
    parts = build(history, TOOLS)["contents"][1]["parts"]
    assert parts[:2] == [{"text": "Let me check."}, {"text": "Two lookups."}]
    assert [list(part) for part in parts[2:]] == [["functionCall"], ["functionCall"]]


@pytest.mark.parametrize("blank", ["", "   "])
def test_blank_text_is_never_sent(blank: str) -> None:
    history = reference_history()
    history[2] = ChatMessage.assistant_tool_calls(
        [
            ToolCall("call_weather", "get_weather", {"city": "Paris"}),
            ToolCall("call_time", "get_time"),
        ],
        blank,
    )
    history += [ChatMessage.user(blank), ChatMessage.assistant(blank)]
    contents = build(history)["contents"]
    assert len(contents) == 3
    assert [list(part) for part in contents[1]["parts"]] == [["functionCall"], ["functionCall"]]


def test_a_history_with_nothing_to_send_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build([ChatMessage.system("Rules."), ChatMessage.assistant("")])
    assert caught.value.code == "no_messages"


def test_calls_without_a_user_turn_before_them_are_refused() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build(reference_history()[2:])
    assert caught.value.code == "invalid_turn_order"


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ([ChatMessage.tool_result("call_nope", "x")], "unknown_tool_call_id"),
        ([ChatMessage.tool_result("call_time", "again")], "duplicate_tool_result"),
        ([ChatMessage.tool("no id")], "missing_tool_call_id"),
        (
            [ChatMessage.user("Hi"), ChatMessage.tool_result("call_time", "late")],
            "unknown_tool_call_id",
        ),
    ],
)
def test_results_that_answer_no_call_of_the_turn_before_are_refused(
    extra: list[ChatMessage], code: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build([*reference_history(), *extra])
    assert caught.value.code == code


@pytest.mark.parametrize("cut", [3, 4])
def test_an_unanswered_call_is_refused_never_sent(cut: int) -> None:
    history = [*reference_history()[:cut], ChatMessage.user("Well?")]
    with pytest.raises(InvalidArgumentError) as caught:
        build(history)
    assert caught.value.code == "unanswered_tool_call"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ("get_time", {"mode": "ANY", "allowedFunctionNames": ["get_time"]}),
    ],
)
def test_tool_choice_mapping(choice: str, expected: dict[str, Any]) -> None:
    body = build([ChatMessage.user("Hi")], TOOLS, tool_choice=choice, parallel_tool_calls=False)
    assert body["toolConfig"] == {"functionCallingConfig": expected}


def test_no_tool_config_without_a_choice_and_unknown_names_are_refused() -> None:
    assert "toolConfig" not in build([ChatMessage.user("Hi")], TOOLS)
    with pytest.raises(InvalidArgumentError) as caught:
        build([ChatMessage.user("Hi")], TOOLS, tool_choice="get_news")
    assert caught.value.code == "unknown_tool_choice"


def test_generation_config_and_deep_merged_extra() -> None:
    body = build(
        [ChatMessage.user("Hi")],
        temperature=1.5,
        max_tokens=100,
        stop=("END",),
        extra={"generationConfig": {"topP": 0.5, "maxOutputTokens": 50}, "safetySettings": []},
    )
    assert body["generationConfig"] == {
        "temperature": 1.5,
        "maxOutputTokens": 50,
        "stopSequences": ["END"],
        "topP": 0.5,
    }
    assert body["safetySettings"] == []


def test_temperature_is_sent_unless_the_model_says_it_takes_none() -> None:
    assert "temperature" in build([ChatMessage.user("Hi")], temperature=0.2)["generationConfig"]
    body = build([ChatMessage.user("Hi")], temperature=0.2, sampling_parameters=())
    assert "generationConfig" not in body


# Error results ------------------------------------------------------------------------


def test_an_error_result_is_sent_as_an_error_response() -> None:
    history = reference_history()[:4]
    history.append(ChatMessage.tool_result("call_time", "ConnectionError: down", is_error=True))
    failed = build(history, TOOLS)["contents"][2]["parts"][1]["functionResponse"]
    assert failed == {"name": "get_time", "response": {"error": "ConnectionError: down"}}
    fine = build(reference_history(), TOOLS)["contents"][2]["parts"][1]["functionResponse"]
    assert fine["response"] == {"output": TIME_RESULT}


# Function names Gemini refuses ---------------------------------------------------------

TWO_FA = ToolSpec(
    "2fa_verify",
    "Check a one-time code",
    {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
)


def two_fa_history() -> list[ChatMessage]:
    return [
        ChatMessage.user("Verify 123456"),
        ChatMessage.assistant_tool_calls([ToolCall("call_2fa", "2fa_verify", {"code": "123456"})]),
        ChatMessage.tool_result("call_2fa", '{"valid": true}'),
    ]


@pytest.mark.parametrize("name", ["2fa_verify", "-dash", "9"])
def test_names_gemini_refuses_get_a_stable_valid_alias(name: str) -> None:
    alias = gemini_function_name(name)
    assert FUNCTION_NAME_PATTERN.match(alias)
    assert alias == gemini_function_name(name)  # the same every request
    assert alias != name


def test_valid_names_are_sent_unchanged() -> None:
    assert gemini_function_name("get_weather") == "get_weather"
    assert gemini_function_name("_private") == "_private"


def test_an_aliased_tool_is_renamed_everywhere_on_the_wire() -> None:
    alias = gemini_function_name("2fa_verify")
    body = build(two_fa_history(), (TWO_FA, WEATHER), tool_choice="2fa_verify")
    declared = [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    assert declared == [alias, "get_weather"]
    assert body["contents"][1]["parts"][0]["functionCall"]["name"] == alias
    assert body["contents"][2]["parts"][0]["functionResponse"]["name"] == alias
    assert body["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"] == [alias]
    assert '"2fa_verify"' not in json.dumps(body)  # the real name is never a value


def test_a_call_to_an_alias_is_parsed_back_to_the_real_name() -> None:
    alias = gemini_function_name("2fa_verify")
    response = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": alias, "args": {"code": "1"}}}],
                },
                "finishReason": "STOP",
            }
        ]
    }
    parsed = GeminiProvider(api_key=KEY).parse_response(response, tools=(TWO_FA, WEATHER))
    assert [call.name for call in parsed.tool_calls] == ["2fa_verify"]


def test_the_alias_survives_a_round_trip_through_the_transport() -> None:
    alias = gemini_function_name("2fa_verify")
    call = {"functionCall": {"name": alias, "args": {"code": "1"}}}
    reply = {"candidates": [{"content": {"role": "model", "parts": [call]}}]}
    provider, requests, _ = mock_provider(httpx.Response(200, json=reply))
    result = provider.complete([ChatMessage.user("Verify 1")], tools=[TWO_FA], options=options())
    assert result.tool_calls[0].name == "2fa_verify"
    assert sent(requests[0])["tools"][0]["functionDeclarations"][0]["name"] == alias


def test_a_tool_whose_alias_is_another_tools_name_is_refused() -> None:
    clash = ToolSpec(gemini_function_name("2fa_verify"), "A tool named like the alias")
    with pytest.raises(InvalidArgumentError) as caught:
        build([ChatMessage.user("Hi")], (TWO_FA, clash))
    assert (caught.value.code, caught.value.field) == ("tool_name_collision", "tools")


# Tool schemas --------------------------------------------------------------------------


def test_schema_keywords_gemini_rejects_are_stripped_recursively() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:x",
        "title": "Args",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "examples": ["Paris"], "minLength": 1, "const": "Paris"},
            "days": {"type": "integer", "exclusiveMinimum": 0, "maximum": 14, "default": 3},
            "meta": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "propertyNames": {"pattern": "^[a-z]+$"},
                "patternProperties": {"^x-": {"type": "string"}},
                "unevaluatedProperties": False,
            },
            "when": {"type": "string", "format": "date-time"},
            "site": {"type": "string", "format": "uri", "description": "A page"},
            "tags": {"type": "array", "uniqueItems": True, "contains": {"type": "string"}},
            "unit": {"enum": [1, 2]},
            "mode": {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {}},
        },
        "dependentRequired": {"city": ["days"]},
        "required": ["city", "ghost"],
    }
    result = gemini_parameters(schema)
    assert result == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "enum": ["Paris"], "minLength": 1},
            "days": {"type": "integer", "maximum": 14, "description": "default: 3"},
            "meta": {"type": "object"},
            "when": {"type": "string", "format": "date-time"},
            "site": {"type": "string", "description": "A page (format: uri)"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "unit": {"description": "one of: 1, 2"},
            "mode": {},
        },
        "required": ["city"],
    }
    body = build([ChatMessage.user("Hi")], (ToolSpec("search", "Search", schema),))
    assert body["tools"][0]["functionDeclarations"][0]["parameters"] == result


def test_refs_are_inlined_and_nullable_unions_flattened() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {
            "at": {"$ref": "#/$defs/Point", "description": "Where"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "size": {"type": ["integer", "null"]},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "both": {"allOf": [{"$ref": "#/$defs/Point"}, {"required": ["x"]}]},
        },
    }
    assert gemini_parameters(schema) == {
        "type": "object",
        "properties": {
            "at": {
                "type": "object",
                "properties": {"x": {"type": "number"}},
                "description": "Where",
            },
            "note": {"nullable": True, "type": "string"},
            "size": {"nullable": True, "type": "integer"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "both": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
        },
    }


def test_a_recursive_schema_is_sent_whole_as_json_schema() -> None:
    schema = {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {"head": {"$ref": "#/$defs/Node"}},
    }
    body = build([ChatMessage.user("Hi")], (ToolSpec("walk", "Walk a list", schema),))
    declaration = body["tools"][0]["functionDeclarations"][0]
    assert "parameters" not in declaration
    assert declaration["parametersJsonSchema"] == schema


def test_no_argument_tools_have_no_parameters() -> None:
    free_form = ToolSpec("log", "Log", {"type": "object", "additionalProperties": True})
    body = build([ChatMessage.user("Hi")], (TIME, free_form))
    assert body["tools"][0]["functionDeclarations"] == [
        {"name": "get_time", "description": "Get the current local time"},
        {"name": "log", "description": "Log"},
    ]


# Model id ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model", ["../secrets", "gemini?key=x", "gemini#x", "gemini/other", "a b", "models/", "ü"]
)
def test_an_invalid_model_id_is_refused_before_any_request(model: str) -> None:
    provider, requests, _ = mock_provider(httpx.Response(200, json=REFERENCE_C))
    with pytest.raises(InvalidArgumentError) as caught:
        provider.complete([ChatMessage.user("Hi")], options=options(model=model))
    assert caught.value.code == "invalid_model"
    assert requests == []


def test_a_models_prefix_is_accepted() -> None:
    provider, requests, _ = mock_provider(httpx.Response(200, json=REFERENCE_C))
    provider.complete([ChatMessage.user("Hi")], options=options(model="models/gemini-2.5-flash"))
    assert str(requests[0].url) == URL


# Response parsing ----------------------------------------------------------------------


def test_thought_parts_are_thinking_not_content() -> None:
    body = copy.deepcopy(REFERENCE_C)
    body["candidates"][0]["content"]["parts"] = [
        {"text": "Considering units.", "thought": True},
        {"text": "It is "},
        {"text": "18 °C.", "thoughtSignature": "abc"},
    ]
    response = parse(body)
    assert response.content == "It is 18 °C."
    assert response.thinking == "Considering units."


def test_calls_without_ids_or_args_get_fresh_ids_and_empty_objects() -> None:
    body = copy.deepcopy(REFERENCE_B)
    body["candidates"][0]["content"]["parts"] = [
        {"text": "Checking."},
        {"functionCall": {"name": "get_time"}},
        {"functionCall": {"args": {}}},
        {
            "functionCall": {"name": "get_weather", "args": {"city": "Rome"}},
            "thoughtSignature": "s2",
        },
    ]
    response = parse(body)
    assert response.content == "Checking."
    assert response.tool_calls is not None
    first, second = response.tool_calls
    assert (first.name, first.arguments) == ("get_time", {})
    assert first.id != second.id
    assert response.finish_reason == "tool_calls"
    assert response.provider_metadata == {
        "gemini": {"calls": {second.id: {"thought_signature": "s2"}}}
    }
    # A synthesised id is never sent to Gemini; the signature is.
    parts = build(reference_history(turn=response.to_message()))["contents"][1]["parts"]
    assert parts[1] == {"functionCall": {"name": "get_time", "args": {}}}
    assert parts[2]["thoughtSignature"] == "s2"
    assert "id" not in parts[2]["functionCall"]


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("IMAGE_SAFETY", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "stop"),
        ("UNEXPECTED_TOOL_CALL", "stop"),
        ("TOO_MANY_TOOL_CALLS", "stop"),
        ("OTHER", "stop"),
        (None, "stop"),
    ],
)
def test_finish_reason_mapping(reason: str | None, expected: str) -> None:
    body = copy.deepcopy(REFERENCE_C)
    body["candidates"][0]["finishReason"] = reason
    assert parse(body).finish_reason == expected


def test_a_malformed_call_ends_the_turn_without_calls() -> None:
    body = {"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL"}], "usageMetadata": {}}
    response = parse(body)
    assert (response.content, response.tool_calls, response.finish_reason) == ("", None, "stop")


def test_a_blocked_prompt_is_a_content_filter_with_empty_content() -> None:
    body = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}}
    response = parse(body)
    assert (response.content, response.finish_reason) == ("", "content_filter")
    assert response.usage.prompt_tokens == 9


def test_usage_adds_tool_prompt_tokens_and_sums_a_missing_total() -> None:
    body = copy.deepcopy(REFERENCE_C)
    body["usageMetadata"] = {
        "promptTokenCount": 10,
        "toolUsePromptTokenCount": 5,
        "candidatesTokenCount": 3,
        "thoughtsTokenCount": 2,
    }
    usage = parse(body).usage
    assert usage.to_dict() == {
        "prompt_tokens": 15,
        "completion_tokens": 5,
        "total_tokens": 20,
        "cached_prompt_tokens": 0,
        "reasoning_tokens": 2,
    }


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"candidates": []},
        {"candidates": ["x"]},
        {"candidates": [{"content": {"parts": "text"}}]},
        {"candidates": [{"content": {"parts": [1]}}]},
        {"candidates": [{}], "usageMetadata": {"promptTokenCount": -1}},
    ],
)
def test_bodies_we_cannot_understand(body: dict[str, Any]) -> None:
    with pytest.raises(ProviderResponseError):
        parse(body)


# Property: any well-formed history becomes a body the API accepts -----------------------

TEXTS = st.sampled_from(["", " ", "ok", '{"a": 1}', "[1]"]) | st.text(max_size=12)
CALL_IDS = st.text(alphabet="abcXY019_-.:|", min_size=1, max_size=10)
ARGUMENTS = st.just({}) | st.dictionaries(st.sampled_from(["city", "n"]), st.integers(), max_size=2)


def _history_call(call_id: str) -> st.SearchStrategy[ToolCall]:
    return st.just(ToolCall(call_id, "get_time", raw_arguments="{oops")) | st.builds(
        lambda arguments: ToolCall(call_id, "get_weather", arguments), ARGUMENTS
    )


def _native_ids(ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Either no native data, or the turn came from Gemini: native ids and a signature."""
    native = {i: {"id": f"g{n}-{i}"} for n, i in enumerate(ids)}
    native[ids[0]]["thought_signature"] = "c2ln"
    return st.sampled_from([{"gemini": {"calls": {}}}, {"gemini": {"calls": native}}])


def histories() -> st.SearchStrategy[list[ChatMessage]]:
    """Turns of calls, each answered (some flagged), then maybe a user message or answer."""
    return shared_histories(
        texts=TEXTS,
        first_user_texts=st.text(min_size=1, max_size=12).filter(str.strip),
        ids=CALL_IDS,
        calls=_history_call,
        systems=(0, 2),
        rounds=(1, 1),
        turns_per_round=(0, 3),
        calls_per_turn=(1, 3),
        turn_metadata=_native_ids,
        interludes=(Role.USER, Role.ASSISTANT),
        final_answers=False,
    )


@settings(max_examples=150, deadline=None)
@given(histories())
def test_every_well_formed_history_passes_the_validator(history: list[ChatMessage]) -> None:
    body = build(history, TOOLS, tool_choice="auto")
    parts = [part for content in body["contents"] for part in content["parts"]]
    calls = [part["functionCall"] for part in parts if "functionCall" in part]
    responses = [part["functionResponse"] for part in parts if "functionResponse" in part]
    stored = [call for message in history for call in message.tool_calls or ()]
    assert [call["name"] for call in calls] == [call.name for call in stored]
    assert [r["name"] for r in responses] == [call.name for call in stored]
    assert all(isinstance(r["response"], dict) for r in responses)
    assert [c.get("id") for c in calls] == [r.get("id") for r in responses]
    # A failed result is sent as {"error": text} instead of its output.
    results = {m.tool_call_id: m for m in history if m.tool_call_id is not None}
    for call, response in zip(stored, responses, strict=True):
        result = results[call.id]
        if result.is_error:
            assert response["response"] == {"error": result.content}
        else:
            assert response["response"] != {"error": result.content}


def test_schema_edge_cases() -> None:
    schema = {
        "type": "object",
        "properties": {
            "anything": True,
            "mixed": {"type": ["string", "integer", "null"]},
            "pair": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]},
            "names": {"type": "array", "items": {"type": "string", "title": "Name"}},
            "count": {"type": "integer", "format": "int64"},
            "ratio": {"type": "number", "format": "percent"},
        },
    }
    assert gemini_parameters(schema) == {
        "type": "object",
        "properties": {
            "anything": {},
            "mixed": {"nullable": True, "anyOf": [{"type": "string"}, {"type": "integer"}]},
            "pair": {"type": "array", "items": {"type": "number"}},
            "names": {"type": "array", "items": {"type": "string"}},
            "count": {"type": "integer", "format": "int64"},
            "ratio": {"type": "number"},
        },
    }


def test_an_external_ref_is_sent_whole_as_json_schema() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "https://example.com/x.json"}}}
    body = build([ChatMessage.user("Hi")], (ToolSpec("fetch", parameters=schema),))
    assert body["tools"][0]["functionDeclarations"] == [
        {"name": "fetch", "parametersJsonSchema": schema}
    ]


def test_unknown_parts_are_ignored_and_bad_usage_is_refused() -> None:
    body = copy.deepcopy(REFERENCE_C)
    body["candidates"][0]["content"]["parts"].append({"executableCode": {"code": "1+1"}})
    assert parse(body).content.startswith("It is 18")
    body["usageMetadata"] = [1]
    with pytest.raises(ProviderResponseError):
        parse(body)
