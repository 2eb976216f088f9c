"""Tool runs against a fake Responses API: reasoning carried between rounds, whole or streamed."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from django.forms.models import model_to_dict

from conversations.models import Conversation, Message, ModelCall, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.openai_responses import OpenAIResponsesProvider
from conversations.services import run_tool_loop
from conversations.services.transcript.messages import create_conversation
from conversations.tools import registry, tool
from tests.providers.mock_http import Recorder
from tests.providers.responses_conformance import assert_valid_request
from tests.providers.responses_server import (
    call_item,
    message_item,
    reasoning_item,
    response_body,
    streamed_reply,
    whole_reply,
)

pytestmark = pytest.mark.django_db

REASONING = reasoning_item("rs_1", ["The user wants a sum."], "gAAAAB-opaque-reasoning==")
ROUNDS = [
    response_body(
        [REASONING, call_item("fc_1", "call_1", "add", '{"a": 1, "b": 2}')],
        usage=(50, 40, 16, 32),
    ),
    response_body([message_item("msg_1", "It is 3.")], usage=(90, 6, 48, 0)),
]


@pytest.fixture
def tools():
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        yield r


def fake_server() -> Recorder:
    """Answers each round in turn, streamed when the request asks for a stream."""

    def answer(round_body: dict[str, Any]) -> Any:
        def reply(request: httpx.Request) -> httpx.Response:
            streamed = json.loads(request.content).get("stream") is True
            return (streamed_reply if streamed else whole_reply)(round_body)

        return reply

    return Recorder(*(answer(body) for body in ROUNDS), strict=True)


def run_with(profile, user, *, stream: bool) -> tuple[Run, Recorder]:
    profile.stream = stream
    profile.save()
    server = fake_server()
    provider = OpenAIResponsesProvider(api_key="sk-test", http_client=server.client)
    conversation = create_conversation(owner=user, profile=profile)
    run = run_tool_loop(conversation=conversation, content="1+2?", provider=provider)
    return run, server


_VOLATILE = {"id", "run", "conversation", "message", "tool_call", "created_at", "latency_ms"}


def record(run: Run) -> dict[str, Any]:
    """What the run stored, without ids, timestamps and timings."""
    messages = []
    for message in Message.objects.filter(run=run).order_by("position"):
        row = model_to_dict(message, exclude=[*_VOLATILE, "search_vector"])
        row["calls"] = [
            model_to_dict(call, exclude=[*_VOLATILE, "started_at", "finished_at"])
            for call in ToolCallRow.objects.filter(message=message).order_by("index")
        ]
        messages.append(row)
    usage = list(
        ModelCall.objects.filter(run=run)
        .order_by("started_at", "pk")
        .values("prompt_tokens", "completion_tokens", "cached_prompt_tokens", "reasoning_tokens")
    )
    return {"messages": messages, "usage": usage}


@pytest.mark.parametrize("stream", [False, True])
def test_the_second_round_carries_the_first_rounds_reasoning_statelessly(
    profile, user, tools, stream: bool
) -> None:
    run, server = run_with(profile, user, stream=stream)
    assert run.status == Run.Status.COMPLETED and run.final_content == "It is 3."
    first, second = server.bodies
    for body in server.bodies:
        assert_valid_request(body)
        assert body["store"] is False
        assert body["include"] == ["reasoning.encrypted_content"]
        assert body.get("stream", False) is stream
    assert "reasoning" not in [item.get("type") for item in first["input"]]
    replayed = second["input"][len(first["input"]) :]
    assert replayed == [
        REASONING,
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "add",
            "arguments": '{"a":1,"b":2}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "3"},
    ]


def test_the_stored_record_is_the_same_whole_or_streamed(profile, user, tools) -> None:
    whole, _ = run_with(profile, user, stream=False)
    streamed, _ = run_with(profile, user, stream=True)
    assert record(whole) == record(streamed)
    stored = record(whole)
    assert stored["messages"][1]["provider_metadata"] == {
        "openai_responses": {"reasoning": [REASONING], "call_items": {"call_1": "fc_1"}}
    }
    assert stored["usage"] == [
        {
            "prompt_tokens": 50,
            "completion_tokens": 40,
            "cached_prompt_tokens": 16,
            "reasoning_tokens": 32,
        },
        {
            "prompt_tokens": 90,
            "completion_tokens": 6,
            "cached_prompt_tokens": 48,
            "reasoning_tokens": 0,
        },
    ]


def test_moving_the_conversation_to_anthropic_leaks_no_reasoning_item(profile, user, tools) -> None:
    run, _ = run_with(profile, user, stream=False)
    conversation = Conversation.objects.get(pk=run.conversation_id)
    anthropic = Recorder(
        httpx.Response(
            200,
            json={
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [{"type": "text", "text": "Still 3."}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 30, "output_tokens": 3},
            },
        ),
        strict=True,
    )
    provider = AnthropicProvider(api_key="sk-ant-test", http_client=anthropic.client)
    follow_up = run_tool_loop(conversation=conversation, content="Sure?", provider=provider)
    assert follow_up.status == Run.Status.COMPLETED
    sent = anthropic.bodies[0]
    text = json.dumps(sent)
    assert "encrypted" not in text and "rs_1" not in text and "fc_1" not in text
    assert "reasoning" not in text
    blocks = [block for message in sent["messages"] for block in message["content"]]
    assert {"type": "tool_use", "id": "call_1", "name": "add", "input": {"a": 1, "b": 2}} in blocks
