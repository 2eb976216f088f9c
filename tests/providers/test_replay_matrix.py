"""Cross-provider replay: turns parsed from each provider, sent to every provider.

A conversation may start on one provider and continue on any other. For each
source provider, its reference responses (a turn with two parallel calls, one
without arguments, then a final text) are parsed into value objects and stored
as a history; that history is then built into a request for each adapter, and
the validator of that provider's wire (written from its HTTP 400 rules, or the
official SDK's types for the Responses API) must find nothing wrong. A last
case mixes turns from every source in one conversation.
Results reporting a failure keep their flag where the target wire has one, and
a tool whose name Gemini refuses (``2fa_verify``) travels to every target and
comes back under its real name.
"""

from __future__ import annotations

from typing import Any

import pytest

from conversations.domain import ChatMessage, ToolCall, ToolSpec
from conversations.providers.base import CompletionOptions
from conversations.providers.gemini import gemini_function_name
from tests.providers import (
    test_anthropic,
    test_gemini,
    test_ollama,
    test_openai,
    test_openai_responses,
)
from tests.providers.replay import ADAPTERS, assert_every_adapter_accepts
from tests.providers.responses_server import call_item, response_body
from tests.providers.test_openai import TOOLS

SOURCES = {
    "openai": (test_openai.REFERENCE_CALLS_RESPONSE, test_openai.REFERENCE_TEXT_RESPONSE),
    "anthropic": (test_anthropic.REFERENCE_B, test_anthropic.REFERENCE_C),
    "gemini": (test_gemini.REFERENCE_B, test_gemini.REFERENCE_C),
    "ollama": (test_ollama.REFERENCE_CALLS_RESPONSE, test_ollama.REFERENCE_TEXT_RESPONSE),
    "openai_responses": (
        test_openai_responses.REFERENCE_CALLS,
        test_openai_responses.REFERENCE_TEXT,
    ),
}


def turn_from(source: str, known: set[str]) -> list[ChatMessage]:
    """A user question, the source's call turn, results for each call, its final answer."""
    adapter = ADAPTERS[source][0]
    calls_body, text_body = SOURCES[source]
    calls = adapter.parse_response(calls_body, known_ids=frozenset(known))
    assert calls.has_tool_calls, source
    known.update(c.id for c in calls.tool_calls)
    results = [
        ChatMessage.tool_result(call.id, f'{{"from": "{source}", "tool": "{call.name}"}}')
        for call in calls.tool_calls
    ]
    final = adapter.parse_response(text_body, known_ids=frozenset(known))
    return [
        ChatMessage.user(f"Question for {source}: weather in Paris, and the time?"),
        calls.to_message(),
        *results,
        final.to_message(),
    ]


@pytest.mark.parametrize("target", sorted(ADAPTERS))
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_history_from_source_is_accepted_by_target(source: str, target: str) -> None:
    history = [ChatMessage.system("You are a helpful assistant."), *turn_from(source, set())]
    history.append(ChatMessage.user("And tomorrow?"))
    adapter, validate, model = ADAPTERS[target]
    body = adapter.build_payload(history, list(TOOLS), CompletionOptions(model=model))
    assert validate(body) == [], (source, target, body)


def test_one_conversation_mixing_all_sources_is_accepted_everywhere() -> None:
    known: set[str] = set()
    history = [ChatMessage.system("You are a helpful assistant.")]
    for source in ("anthropic", "openai_responses", "gemini", "openai", "ollama"):
        history.extend(turn_from(source, known))
    history.append(ChatMessage.user("Thanks!"))
    # Reference responses reuse ids across providers; parsing with known ids keeps them unique.
    all_ids = [c.id for m in history if m.tool_calls for c in m.tool_calls]
    assert len(all_ids) == len(set(all_ids)) == 10
    assert_every_adapter_accepts(history, TOOLS)


def _error_history(source: str) -> list[ChatMessage]:
    """The source's turn, with its first result reporting a failure."""
    turn = turn_from(source, set())
    failed = turn[2]
    assert failed.tool_call_id is not None
    turn[2] = ChatMessage.tool_result(failed.tool_call_id, "ConnectionError: down", is_error=True)
    return turn


def _error_flags(target: str, body: dict[str, Any]) -> list[Any]:
    """Per result on ``target``'s wire: its error flag (``None`` where the wire has none)."""
    match target:
        case "anthropic":
            blocks = [
                b
                for m in body["messages"]
                if m["role"] == "user" and isinstance(m["content"], list)
                for b in m["content"]
            ]
            return [b.get("is_error") for b in blocks if b.get("type") == "tool_result"]
        case "gemini":
            parts = [p for c in body["contents"] for p in c["parts"]]
            responses = [
                p["functionResponse"]["response"] for p in parts if "functionResponse" in p
            ]
            return [True if "error" in r else None for r in responses]
        case "openai_responses":
            outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
            assert all(set(i) == {"type", "call_id", "output"} for i in outputs)
            return [None for _ in outputs]
        case _:
            results = [m for m in body["messages"] if m["role"] == "tool"]
            assert all(set(m) <= {"role", "content", "tool_call_id", "tool_name"} for m in results)
            return [None for _ in results]


@pytest.mark.parametrize("target", sorted(ADAPTERS))
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_an_error_result_is_flagged_where_the_target_has_a_flag(source: str, target: str) -> None:
    adapter, validate, model = ADAPTERS[target]
    body = adapter.build_payload(
        _error_history(source), list(TOOLS), CompletionOptions(model=model)
    )
    assert validate(body) == [], (source, target, body)
    flagged = target in ("anthropic", "gemini")
    assert _error_flags(target, body) == [True if flagged else None, None]


TWO_FA = ToolSpec(
    "2fa_verify",
    "Check a one-time code",
    {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
)


@pytest.mark.parametrize("target", sorted(ADAPTERS))
def test_a_tool_name_starting_with_a_digit_travels_and_comes_back(target: str) -> None:
    adapter, validate, model = ADAPTERS[target]
    history = [
        ChatMessage.user("Verify 123456"),
        ChatMessage.assistant_tool_calls([ToolCall("call_2fa", "2fa_verify", {"code": "123456"})]),
        ChatMessage.tool_result("call_2fa", '{"valid": false}', is_error=True),
        ChatMessage.user("Try 654321"),
    ]
    tools = [TWO_FA, *TOOLS]
    options = CompletionOptions(model=model, tool_choice="2fa_verify")
    body = adapter.build_payload(history, tools, options)
    assert validate(body) == [], (target, body)
    # The model answers with the name it was shown; parsing gives the real one back.
    wire_name = gemini_function_name("2fa_verify") if target == "gemini" else "2fa_verify"
    reply = CALL_REPLIES[target](wire_name)
    parsed = adapter.parse_response(reply, known_ids=frozenset({"call_2fa"}), tools=tools)
    assert [call.name for call in parsed.tool_calls or ()] == ["2fa_verify"]


CALL_REPLIES = {
    "openai": lambda name: {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_x",
                            "type": "function",
                            "function": {"name": name, "arguments": '{"code": "654321"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    },
    "anthropic": lambda name: {
        "content": [
            {"type": "tool_use", "id": "toolu_x", "name": name, "input": {"code": "654321"}}
        ],
        "stop_reason": "tool_use",
    },
    "gemini": lambda name: {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": name, "args": {"code": "654321"}}}],
                },
                "finishReason": "STOP",
            }
        ]
    },
    "ollama": lambda name: {
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": name, "arguments": {"code": "654321"}}}],
        },
        "done": True,
        "done_reason": "stop",
    },
    "openai_responses": lambda name: response_body(
        [call_item("fc_x", "call_x", name, '{"code": "654321"}')]
    ),
}
