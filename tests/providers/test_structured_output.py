"""Each adapter asks for structured output its vendor's native way (request bodies captured)."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from conversations.domain import ChatMessage, CompletionResponse, ToolCall, ToolSpec
from conversations.domain.output import OutputSpec
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.base import CompletionOptions
from conversations.providers.demo import DemoProvider
from conversations.providers.demo_output import SAMPLE_SCHEMAS
from conversations.providers.gemini import GeminiProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import OpenAIProvider
from conversations.providers.openai_responses import OpenAIResponsesProvider
from conversations.providers.structured import OUTPUT_TOOL_NAME, unwrap_output_tool
from tests.providers.mock_http import provider_with_replies
from tests.providers.responses_conformance import assert_valid_request
from tests.providers.responses_server import message_item, response_body

STRICT = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["label"],
    "additionalProperties": False,
}
LOOSE = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
RECURSIVE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        }
    },
    "$ref": "#/$defs/node",
}
ANSWER = '{"label": "yes"}'
WEATHER = ToolSpec(name="weather", description="The weather.", parameters={"type": "object"})
ASK = [ChatMessage.user("Is it?")]


def options(model: str, schema: Any = STRICT, **kwargs: Any) -> CompletionOptions:
    return CompletionOptions(model=model, output_schema=schema, **kwargs)


def openai_reply(content: str) -> httpx.Response:
    message = {"role": "assistant", "content": content}
    return httpx.Response(
        200, json={"model": "gpt", "choices": [{"message": message, "finish_reason": "stop"}]}
    )


def anthropic_reply(*blocks: dict[str, Any]) -> httpx.Response:
    body = {"model": "claude", "content": list(blocks), "stop_reason": "end_turn"}
    return httpx.Response(200, json={**body, "usage": {"input_tokens": 1, "output_tokens": 1}})


def body_of(requests: list[httpx.Request]) -> dict[str, Any]:
    (request,) = requests
    return json.loads(request.content)  # type: ignore[no-any-return]


def test_openai_asks_for_a_strict_json_schema_when_the_schema_is_in_the_strict_subset():
    provider, requests, _ = provider_with_replies(OpenAIProvider, openai_reply(ANSWER), api_key="k")
    response = provider.complete(ASK, options=options("gpt-4o"))
    sent = body_of(requests)["response_format"]
    assert sent == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": STRICT, "strict": True},
    }
    assert json.loads(response.content) == {"label": "yes"}


def test_openai_sends_strict_false_outside_the_subset_and_logs_it_once(caplog):
    provider, requests, _ = provider_with_replies(
        OpenAIProvider, openai_reply(ANSWER), openai_reply(ANSWER), api_key="k"
    )
    schema = {**LOOSE, "description": "logged once"}
    with caplog.at_level(logging.INFO, logger="conversations.providers"):
        provider.complete(ASK, options=options("gpt-4o", schema))
        provider.complete(ASK, options=options("gpt-4o", schema))
    bodies = [json.loads(r.content) for r in requests]
    assert [b["response_format"]["json_schema"]["strict"] for b in bodies] == [False, False]
    said = [r.getMessage() for r in caplog.records if "strict false" in r.getMessage()]
    assert len(said) == 1
    assert "additionalProperties" in said[0]


def test_openai_sends_no_response_format_without_a_schema():
    provider, requests, _ = provider_with_replies(OpenAIProvider, openai_reply("hi"), api_key="k")
    provider.complete(ASK, options=CompletionOptions(model="gpt-4o"))
    assert "response_format" not in body_of(requests)


def test_anthropic_uses_native_structured_output_on_models_that_have_it():
    provider, requests, _ = provider_with_replies(
        AnthropicProvider, anthropic_reply({"type": "text", "text": ANSWER}), api_key="k"
    )
    response = provider.complete(ASK, tools=[WEATHER], options=options("claude-sonnet-4-5"))
    body = body_of(requests)
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": STRICT}}
    assert [tool["name"] for tool in body["tools"]] == ["weather"]
    assert "tool_choice" not in body
    assert json.loads(response.content) == {"label": "yes"}


def test_anthropic_forces_the_output_tool_on_older_models_when_thinking_is_off():
    block = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": OUTPUT_TOOL_NAME,
        "input": {"label": "no"},
    }
    provider, requests, _ = provider_with_replies(
        AnthropicProvider, anthropic_reply(block), api_key="k"
    )
    response = provider.complete(ASK, options=options("claude-3-5-sonnet-latest"))
    body = body_of(requests)
    assert body["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL_NAME}
    assert body["tools"][0]["input_schema"] == STRICT
    assert "output_config" not in body
    answer = unwrap_output_tool(response)
    assert json.loads(answer.content) == {"label": "no"}
    assert answer.tool_calls is None


def test_anthropic_never_forces_a_tool_while_extended_thinking_is_on():
    provider, requests, _ = provider_with_replies(
        AnthropicProvider, anthropic_reply({"type": "text", "text": ANSWER}), api_key="k"
    )
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    provider.complete(ASK, options=options("claude-3-7-sonnet-latest", extra=thinking))
    body = body_of(requests)
    assert "tool_choice" not in body
    assert "tools" not in body
    assert body["thinking"]["type"] == "enabled"


def test_anthropic_does_not_force_the_output_tool_while_other_tools_are_offered():
    provider, requests, _ = provider_with_replies(
        AnthropicProvider, anthropic_reply({"type": "text", "text": ANSWER}), api_key="k"
    )
    provider.complete(ASK, tools=[WEATHER], options=options("claude-3-5-haiku-latest"))
    body = body_of(requests)
    assert [tool["name"] for tool in body["tools"]] == ["weather"]
    assert "tool_choice" not in body


def gemini_reply(text: str) -> httpx.Response:
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
    return httpx.Response(200, json={"candidates": [candidate], "modelVersion": "gemini"})


def test_gemini_asks_for_json_with_the_schema_in_its_openapi_subset():
    provider, requests, _ = provider_with_replies(GeminiProvider, gemini_reply(ANSWER), api_key="k")
    response = provider.complete(ASK, options=options("gemini-2.5-flash"))
    generation = body_of(requests)["generationConfig"]
    assert generation["responseMimeType"] == "application/json"
    assert generation["responseSchema"]["properties"]["label"]["enum"] == ["yes", "no"]
    assert "additionalProperties" not in generation["responseSchema"]
    assert json.loads(response.content) == {"label": "yes"}


def test_gemini_sends_a_recursive_schema_as_its_json_schema_field():
    provider, requests, _ = provider_with_replies(GeminiProvider, gemini_reply("{}"), api_key="k")
    provider.complete(ASK, options=options("gemini-2.5-flash", RECURSIVE))
    generation = body_of(requests)["generationConfig"]
    assert generation["responseJsonSchema"] == RECURSIVE
    assert "responseSchema" not in generation


def test_gemini_leaves_the_schema_out_while_tools_are_offered():
    provider, requests, _ = provider_with_replies(GeminiProvider, gemini_reply(ANSWER), api_key="k")
    provider.complete(ASK, tools=[WEATHER], options=options("gemini-2.5-flash"))
    assert "generationConfig" not in body_of(requests)


def test_ollama_sends_the_schema_as_format():
    reply = httpx.Response(
        200,
        json={"model": "llama", "message": {"role": "assistant", "content": ANSWER}, "done": True},
    )
    provider, requests, _ = provider_with_replies(OllamaProvider, reply)
    response = provider.complete(ASK, options=options("llama3.2"))
    assert body_of(requests)["format"] == STRICT
    assert json.loads(response.content) == {"label": "yes"}


@pytest.mark.parametrize("name", sorted(SAMPLE_SCHEMAS))
def test_the_demo_answers_its_sample_schemas_with_valid_json(name):
    schema = SAMPLE_SCHEMAS[name]
    response = DemoProvider().complete(ASK, options=options("demo", schema))
    assert Draft202012Validator(schema).is_valid(json.loads(response.content))


def test_the_demo_answers_a_recursive_schema_with_valid_json():
    response = DemoProvider().complete(ASK, options=options("demo", RECURSIVE))
    assert Draft202012Validator(RECURSIVE).is_valid(json.loads(response.content))


def test_a_mapping_given_as_output_schema_becomes_a_named_spec_with_its_digest():
    spec = CompletionOptions(model="m", output_schema=STRICT).output_schema
    assert isinstance(spec, OutputSpec)
    assert spec.name == "output"
    assert spec.sha256 == OutputSpec(schema=dict(reversed(list(STRICT.items())))).sha256


def test_only_a_lone_call_of_the_output_tool_is_taken_for_the_answer():
    calls = (
        ToolCall(id="a", name=OUTPUT_TOOL_NAME, arguments={"label": "yes"}),
        ToolCall(id="b", name="weather", arguments={}),
    )
    response = CompletionResponse(content="", model="m", tool_calls=calls)
    assert unwrap_output_tool(response) is response


def test_the_responses_api_asks_for_a_json_schema_text_format_its_sdk_accepts():
    reply = httpx.Response(200, json=response_body([message_item("msg_1", ANSWER)]))
    provider, requests, _ = provider_with_replies(OpenAIResponsesProvider, reply, api_key="k")
    response = provider.complete(ASK, options=options("gpt-5-mini", LOOSE))
    body = body_of(requests)
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "output", "schema": LOOSE, "strict": False}
    }
    assert_valid_request(body)
    assert json.loads(response.content) == {"label": "yes"}
