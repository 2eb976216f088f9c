"""OllamaProvider: worked examples of the vendor wire format, mapping rules and parsing."""

from __future__ import annotations

import json
import logging
import re

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    ToolCall,
    Usage,
)
from conversations.exceptions import ProviderResponseError
from conversations.providers.base import CompletionOptions
from conversations.providers.ollama import OllamaProvider

from .test_openai import TOOLS, histories, reference_history
from .wire_ollama import validate_ollama_request

ID_WEATHER = "call_k3v9x2ab"
ID_TIME = "call_p7q1m4zt"

# Worked examples of /api/chat: (a) a request, (b) a calls reply, (c) a text reply.
REFERENCE_REQUEST = json.loads(r"""
{
  "model": "qwen3",
  "stream": false,
  "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What's the weather in Paris, and what time is it?"},
    {
      "role": "assistant",
      "content": "",
      "tool_calls": [
        {"id": "call_k3v9x2ab", "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}}},
        {"id": "call_p7q1m4zt", "function": {"index": 1, "name": "get_time", "arguments": {}}}
      ]
    },
    {"role": "tool", "tool_name": "get_weather", "tool_call_id": "call_k3v9x2ab", "content": "{\"temp_c\": 18, \"conditions\": \"cloudy\"}"},
    {"role": "tool", "tool_name": "get_time", "tool_call_id": "call_p7q1m4zt", "content": "2026-08-22T14:05:00+02:00"}
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
  ]
}
""")

REFERENCE_CALLS_RESPONSE = json.loads(r"""
{
  "model": "qwen3",
  "created_at": "2026-08-22T12:05:01.184789Z",
  "message": {
    "role": "assistant",
    "content": "",
    "tool_calls": [
      {"id": "call_k3v9x2ab", "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}}},
      {"id": "call_p7q1m4zt", "function": {"index": 1, "name": "get_time", "arguments": {}}}
    ]
  },
  "done_reason": "stop",
  "done": true,
  "total_duration": 3244883583,
  "load_duration": 2969184542,
  "prompt_eval_count": 169,
  "prompt_eval_duration": 141656333,
  "eval_count": 38,
  "eval_duration": 133293625
}
""")

REFERENCE_TEXT_RESPONSE = json.loads(r"""
{
  "model": "qwen3",
  "created_at": "2026-08-22T12:05:03.688511Z",
  "message": {
    "role": "assistant",
    "content": "It is 18 °C and cloudy in Paris, and the local time is 14:05."
  },
  "done_reason": "stop",
  "done": true,
  "total_duration": 890771750,
  "load_duration": 707634750,
  "prompt_eval_count": 241,
  "prompt_eval_duration": 91703208,
  "eval_count": 21,
  "eval_duration": 90282125
}
""")


def options(**kwargs: object) -> CompletionOptions:
    kwargs.setdefault("model", "qwen3")
    return CompletionOptions(**kwargs)  # type: ignore[arg-type]


def build(messages: list[ChatMessage], tools=(), **option_kwargs: object) -> dict:
    body = OllamaProvider().build_payload(messages, tools, options(**option_kwargs))
    assert validate_ollama_request(body) == []
    return body


def reply(message: dict, **body: object) -> dict:
    """A minimal non-streamed /api/chat answer around ``message``."""
    return {"model": "qwen3", "message": message, "done": True, "done_reason": "stop", **body}


# Worked examples of the wire format (the REFERENCE_* bodies above) ------------------


def test_example_a_request_equals_the_reference() -> None:
    body = build(reference_history(ID_WEATHER, ID_TIME), TOOLS)
    assert body == REFERENCE_REQUEST


def test_example_a_reference_request_passes_the_validator() -> None:
    assert validate_ollama_request(REFERENCE_REQUEST) == []


def test_example_b_tool_calls_response() -> None:
    parsed = OllamaProvider().parse_response(REFERENCE_CALLS_RESPONSE)
    assert parsed == CompletionResponse(
        content="",
        model="qwen3",
        usage=Usage(169, 38, 207),
        finish_reason="tool_calls",
        provider="ollama",
        tool_calls=(
            ToolCall(id=ID_WEATHER, name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id=ID_TIME, name="get_time", arguments={}),
        ),
    )


def test_example_c_final_text_with_usage() -> None:
    parsed = OllamaProvider().parse_response(REFERENCE_TEXT_RESPONSE)
    assert parsed == CompletionResponse(
        content="It is 18 °C and cloudy in Paris, and the local time is 14:05.",
        model="qwen3",
        usage=Usage(241, 21, 262),
        finish_reason="stop",
        provider="ollama",
    )


def test_parsed_calls_replay_as_the_reference_assistant_turn() -> None:
    turn = OllamaProvider().parse_response(REFERENCE_CALLS_RESPONSE).to_message()
    history = reference_history(ID_WEATHER, ID_TIME)
    history[2] = turn
    assert build(history, TOOLS) == REFERENCE_REQUEST


# Transport path, end to end -------------------------------------------------------------


def test_history_reaches_the_http_body_with_calls_and_ids_intact(mock_http, sleeps) -> None:
    recorder = mock_http(httpx.Response(200, json=REFERENCE_TEXT_RESPONSE))
    adapter = OllamaProvider(http_client=recorder.client, sleep=sleeps.append)
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

    result = adapter.complete(history, tools=TOOLS, options=options(temperature=0.1))

    (request,) = recorder.requests
    assert str(request.url) == "http://localhost:11434/api/chat"
    assert "authorization" not in request.headers
    body = json.loads(request.content)
    assert validate_ollama_request(body) == []
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_a1",
                    "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}},
                },
                {"id": "call_b2", "function": {"index": 1, "name": "get_time", "arguments": {}}},
            ],
        },
        {
            "role": "tool",
            "content": '{"temp_c": 18}',
            "tool_call_id": "call_a1",
            "tool_name": "get_weather",
        },
        {"role": "tool", "content": "14:05", "tool_call_id": "call_b2", "tool_name": "get_time"},
    ]
    assert body["options"] == {"temperature": 0.1}
    assert result.usage == Usage(241, 21)
    assert sleeps == []


def test_a_key_goes_to_the_authorization_header_for_proxies(mock_http) -> None:
    recorder = mock_http(httpx.Response(200, json=REFERENCE_TEXT_RESPONSE))
    adapter = OllamaProvider(
        api_key="proxy-secret", base_url="https://ollama.example.test/", http_client=recorder.client
    )
    adapter.complete([ChatMessage.user("hi")], options=options())
    (request,) = recorder.requests
    assert str(request.url) == "https://ollama.example.test/api/chat"
    assert request.headers["authorization"] == "Bearer proxy-secret"
    assert "proxy-secret" not in repr(adapter)


# Request mapping --------------------------------------------------------------------------


def test_no_tool_keys_when_no_tools_are_offered() -> None:
    body = build(reference_history(), (), tool_choice="required", parallel_tool_calls=False)
    assert set(body) == {"model", "messages", "stream"}


def test_never_tool_choice_nor_parallel_keys() -> None:
    body = build([ChatMessage.user("hi")], TOOLS, tool_choice="auto", parallel_tool_calls=False)
    assert "tool_choice" not in body
    assert "parallel_tool_calls" not in body
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "get_time"]


@pytest.mark.parametrize(
    ("choice", "offered"),
    [
        (None, ["get_weather", "get_time"]),
        ("auto", ["get_weather", "get_time"]),
        ("required", ["get_weather", "get_time"]),
        ("none", []),
        ("get_time", ["get_time"]),
    ],
)
def test_tool_choice_is_emulated_by_what_is_offered(choice: str | None, offered: list) -> None:
    body = build([ChatMessage.user("hi")], TOOLS, tool_choice=choice)
    assert [t["function"]["name"] for t in body.get("tools", [])] == offered


def test_tool_choice_naming_a_tool_not_offered_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        OllamaProvider().build_payload([ChatMessage.user("hi")], TOOLS, options(tool_choice="x"))
    assert info.value.code == "unknown_tool_choice"


def test_sampling_goes_under_options_and_extra_at_top_level() -> None:
    body = build(
        [ChatMessage.user("hi")],
        temperature=0.3,
        max_tokens=100,
        stop=("</s>",),
        extra={"think": True, "keep_alive": "5m", "options": {"num_ctx": 8192}},
    )
    assert body["options"] == {
        "temperature": 0.3,
        "num_predict": 100,
        "stop": ["</s>"],
        "num_ctx": 8192,
    }
    assert body["think"] is True
    assert body["keep_alive"] == "5m"
    assert "temperature" not in body


def test_temperature_follows_the_models_sampling_parameters() -> None:
    body = build([ChatMessage.user("hi")], temperature=0.3, sampling_parameters=())
    assert "options" not in body


def test_an_error_result_has_no_flag_on_the_ollama_wire() -> None:
    history = [
        ChatMessage.user("time?"),
        ChatMessage.assistant_tool_calls([ToolCall("call_t", "get_time")]),
        ChatMessage.tool_result("call_t", "ConnectionError: down", is_error=True),
    ]
    assert build(history)["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_t",
        "tool_name": "get_time",
        "content": "ConnectionError: down",
    }


def test_raw_arguments_are_sent_as_an_empty_object() -> None:
    body = build(
        [
            ChatMessage.user("w?"),
            ChatMessage.assistant_tool_calls(
                [ToolCall(id="call_1", name="get_weather", raw_arguments='{"city": "Par')]
            ),
            ChatMessage.tool_result("call_1", "error: arguments are not valid JSON"),
        ]
    )
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == {}


def test_several_system_messages_stay_messages_in_order() -> None:
    body = build(
        [
            ChatMessage.system("one"),
            ChatMessage.user("hi"),
            ChatMessage.system("two"),
            ChatMessage.user("again"),
        ]
    )
    assert [m for m in body["messages"] if m["role"] == "system"] == [
        {"role": "system", "content": "one"},
        {"role": "system", "content": "two"},
    ]


def test_tool_names_are_looked_up_across_rounds() -> None:
    # Two rounds calling the same tool: each result gets its own call's name.
    history = [
        ChatMessage.user("a"),
        ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="get_time")]),
        ChatMessage.tool_result("c1", "1"),
        ChatMessage.assistant_tool_calls(
            [ToolCall(id="c2", name="get_weather", arguments={"city": "Oslo"})]
        ),
        ChatMessage.tool_result("c2", "2"),
    ]
    body = build(history)
    assert [m.get("tool_name") for m in body["messages"]] == [
        None,
        None,
        "get_time",
        None,
        "get_weather",
    ]


def test_a_tool_result_answering_no_earlier_call_is_refused() -> None:
    history = [
        ChatMessage.user("hi"),
        ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="get_time")]),
        ChatMessage.tool_result("c1", "ok"),
        ChatMessage.tool_result("c9", "orphan"),
    ]
    with pytest.raises(InvalidArgumentError) as info:
        OllamaProvider().build_payload(history, (), options())
    assert info.value.code == "unknown_tool_call_id"
    assert info.value.field == "3/tool_call_id"


def test_a_tool_message_without_call_id_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        OllamaProvider().build_payload(
            [ChatMessage.user("hi"), ChatMessage.tool("?")], (), options()
        )
    assert info.value.code == "missing_tool_call_id"


# Response parsing ---------------------------------------------------------------------------


def _calls(*calls: object) -> dict:
    return reply({"role": "assistant", "content": "", "tool_calls": list(calls)})


def test_missing_ids_are_fresh_and_unique_not_positional() -> None:
    body = _calls(
        {"function": {"name": "get_time", "arguments": {}}},
        {"function": {"name": "get_time", "arguments": {}}},
    )
    first = OllamaProvider().parse_response(body)
    second = OllamaProvider().parse_response(body)
    assert first.tool_calls is not None
    assert second.tool_calls is not None
    ids = [c.id for c in first.tool_calls + second.tool_calls]
    assert len(set(ids)) == 4
    assert not {"call_0", "call_1"} & set(ids)


def test_duplicate_and_known_ids_are_replaced() -> None:
    body = _calls(
        {"id": "call_aaaaaaaa", "function": {"name": "a", "arguments": {}}},
        {"id": "call_aaaaaaaa", "function": {"name": "b", "arguments": {}}},
        {"id": "call_bbbbbbbb", "function": {"name": "c", "arguments": {}}},
    )
    parsed = OllamaProvider().parse_response(body, known_ids={"call_bbbbbbbb"})
    assert parsed.tool_calls is not None
    ids = [c.id for c in parsed.tool_calls]
    assert ids[0] == "call_aaaaaaaa"
    assert len(set(ids)) == 3
    assert "call_bbbbbbbb" not in ids


def test_a_call_without_a_name_is_dropped_with_a_warning(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="conversations.providers")
    parsed = OllamaProvider().parse_response(
        _calls({"function": {"arguments": {}}}, 7, {"function": {"name": "ok", "arguments": {}}})
    )
    assert parsed.tool_calls is not None
    assert [c.name for c in parsed.tool_calls] == ["ok"]
    assert caplog.text.count("ollama response: dropped tool call") == 2


def test_when_every_call_is_dropped_the_turn_is_a_plain_stop(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="conversations.providers")
    parsed = OllamaProvider().parse_response(_calls({"function": {"name": ""}}))
    assert parsed.tool_calls is None
    assert parsed.finish_reason == "stop"


@pytest.mark.parametrize(
    ("arguments", "decoded", "raw"),
    [
        ({"city": "Paris"}, {"city": "Paris"}, None),
        ({}, {}, None),
        (None, {}, None),
        ('{"city": "Paris"}', {"city": "Paris"}, None),
        ([1, 2], {}, "[1, 2]"),
        ("oops", {}, "oops"),
    ],
)
def test_arguments_that_are_not_an_object_are_kept_raw(
    arguments: object, decoded: dict, raw: str | None
) -> None:
    parsed = OllamaProvider().parse_response(
        _calls({"id": "c1", "function": {"name": "f", "arguments": arguments}})
    )
    assert parsed.tool_calls == (ToolCall(id="c1", name="f", arguments=decoded, raw_arguments=raw),)


@pytest.mark.parametrize(
    ("done_reason", "expected"), [("stop", "stop"), ("length", "length"), (None, "stop")]
)
def test_done_reason_mapping(done_reason: str | None, expected: str) -> None:
    body = reply({"role": "assistant", "content": "x"})
    body["done_reason"] = done_reason
    assert OllamaProvider().parse_response(body).finish_reason == expected


def test_missing_counters_are_zero() -> None:
    # prompt_eval_count is omitted when the whole prompt came from the cache.
    parsed = OllamaProvider().parse_response(
        reply({"role": "assistant", "content": "x"}, eval_count=5)
    )
    assert parsed.usage == Usage(0, 5, 5)


@pytest.mark.parametrize(
    ("thinking", "expected"), [("I should check.", "I should check."), ("  \n", None), (None, None)]
)
def test_thinking(thinking: str | None, expected: str | None) -> None:
    message = {"role": "assistant", "content": "x", "thinking": thinking}
    assert OllamaProvider().parse_response(reply(message)).thinking == expected


def test_null_content_is_empty_text() -> None:
    assert (
        OllamaProvider().parse_response(reply({"role": "assistant", "content": None})).content == ""
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "qwen3", "done": True}, "ollama: the response has no message"),
        ({"error": "model 'x' not found"}, "model 'x' not found"),
        (reply({"content": ["parts"]}), "message content is not text"),
        (reply({"content": "", "tool_calls": {}}), "tool_calls is not a list"),
        (reply({"content": ""}, eval_count=-1), "eval_count is not a count"),
        (reply({"content": ""}, prompt_eval_count="3"), "prompt_eval_count is not a count"),
    ],
)
def test_bodies_we_cannot_understand(body: dict, message: str) -> None:
    with pytest.raises(ProviderResponseError, match=re.escape(message)):
        OllamaProvider().parse_response(body)


# The validator itself ---------------------------------------------------------------------


def _broken(change) -> dict:
    body = json.loads(json.dumps(REFERENCE_REQUEST))
    change(body)
    return body


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda b: b.pop("stream"), "stream: must be false"),
        (lambda b: b.update(tool_choice="auto"), "tool_choice: Ollama has no such field"),
        (lambda b: b.update(parallel_tool_calls=True), "parallel_tool_calls: Ollama has"),
        (lambda b: b.update(temperature=0.1), "temperature: sampling settings belong"),
        (lambda b: b.update(tools=[]), "tools: must be a non-empty array"),
        (lambda b: b.update(messages=[]), "messages: a non-empty array"),
        (
            lambda b: b["messages"][2]["tool_calls"][0]["function"].update(arguments='{"a":1}'),
            "arguments: must be an object",
        ),
        (lambda b: b["messages"][2].update(tool_calls=[]), "tool_calls: must be a non-empty"),
        (lambda b: b["messages"][2].update(content=None), "content: must be a string"),
        (lambda b: b["messages"][3].pop("tool_name"), "tool_name: required"),
        (lambda b: b["messages"][3].update(tool_name="get_time"), "tool_name: 'get_time' but"),
        (lambda b: b["messages"][3].update(tool_call_id="zzz"), "answers no pending call"),
        (lambda b: b["messages"].pop(4), "were never answered"),
        (lambda b: b["messages"].insert(3, {"role": "user", "content": "x"}), "not answered"),
        (lambda b: b["messages"][0].update(role="developer"), "is not one of"),
    ],
)
def test_the_validator_catches_each_rule(change, problem: str) -> None:
    problems = validate_ollama_request(_broken(change))
    assert any(problem in p for p in problems), problems


def test_the_validator_pairs_results_without_ids_by_name() -> None:
    body = _broken(lambda b: [m.pop("tool_call_id") for m in b["messages"][3:]])
    assert validate_ollama_request(body) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories())
def test_any_valid_history_builds_a_valid_body(history: list[ChatMessage]) -> None:
    body = OllamaProvider().build_payload(history, TOOLS, options())
    assert validate_ollama_request(body) == []
    wire_calls = [c for m in body["messages"] for c in m.get("tool_calls", [])]
    stored_calls = [c for m in history if m.tool_calls for c in m.tool_calls]
    assert [c["id"] for c in wire_calls] == [c.id for c in stored_calls]
    assert all(isinstance(c["function"]["arguments"], dict) for c in wire_calls)
