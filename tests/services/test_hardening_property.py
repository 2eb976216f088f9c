"""Random provider answers, through each adapter and the loop, always end a run cleanly.

Text with control characters and lone surrogates, ids and names of any
length, numbers of any size, arguments of any shape: whatever comes back,
the run ends in a terminal status, every stored call has exactly one result,
and nothing escapes as an exception (which the API would answer with a 500).
"""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.models import Conversation, Run, ToolCall
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.gemini import GeminiProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import OpenAIProvider
from conversations.providers.openai_responses import OpenAIResponsesProvider
from conversations.services import run_tool_loop
from conversations.tools import registry, tool

pytestmark = pytest.mark.django_db

EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TERMINAL = {s for s in Run.Status.values if s != Run.Status.RUNNING}

hostile_text = st.text(
    st.characters(exclude_categories=()) | st.sampled_from(["\x00", "\ud800", "\udfff", "\n"]),
    max_size=40,
)
lengths = st.sampled_from([0, 1, 63, 64, 65, 199, 200, 201, 400])
long_names = st.builds(lambda n, c: c * n, lengths, st.sampled_from(["a", "é", "\x00", "echo"]))
names = st.sampled_from(["echo", "missing"]) | long_names | hostile_text
counts = st.none() | st.integers(min_value=-3, max_value=2**70) | st.sampled_from([2**31, 2**63])
json_leaf = st.none() | st.booleans() | st.integers() | hostile_text
arguments = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3),
    max_leaves=10,
)


@st.composite
def calls(draw):
    return [
        (draw(st.none() | names), draw(names), draw(arguments))
        for _ in range(draw(st.integers(min_value=0, max_value=2)))
    ]


def openai_body(text, model, reason, usage, found):
    message = {"role": "assistant", "content": text}
    if found:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for call_id, name, args in found
        ]
    return {
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
    }


def anthropic_body(text, model, reason, usage, found):
    content = [{"type": "text", "text": text}]
    content += [
        {"type": "tool_use", "id": call_id, "name": name, "input": args}
        for call_id, name, args in found
    ]
    return {
        "model": model,
        "content": content,
        "stop_reason": reason,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def gemini_body(text, model, reason, usage, found):
    parts = [{"text": text}] + [{"functionCall": {"name": n, "args": a}} for _, n, a in found]
    return {
        "modelVersion": model,
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": reason}],
        "usageMetadata": {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1]},
    }


def ollama_body(text, model, reason, usage, found):
    message = {"role": "assistant", "content": text}
    if found:
        message["tool_calls"] = [{"function": {"name": n, "arguments": a}} for _, n, a in found]
    return {
        "model": model,
        "message": message,
        "done": True,
        "done_reason": reason,
        "prompt_eval_count": usage[0],
        "eval_count": usage[1],
    }


def responses_body(text, model, reason, usage, found):
    output = [{"type": "message", "content": [{"type": "output_text", "text": text}]}]
    output += [
        {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)}
        for call_id, name, args in found
    ]
    return {
        "model": model,
        "status": reason,
        "output": output,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


ADAPTERS = {
    "openai": (lambda client: OpenAIProvider(api_key="k", http_client=client), openai_body),
    "anthropic": (
        lambda client: AnthropicProvider(api_key="k", http_client=client),
        anthropic_body,
    ),
    "gemini": (lambda client: GeminiProvider(api_key="k", http_client=client), gemini_body),
    "ollama": (lambda client: OllamaProvider(http_client=client), ollama_body),
    "openai_responses": (
        lambda client: OpenAIResponsesProvider(api_key="k", http_client=client),
        responses_body,
    ),
}


@pytest.fixture
def echo_registry():
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def echo(text: str = "") -> str:
            """Give the text back."""
            return text

        yield r


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@EXAMPLES
@given(
    text=hostile_text,
    model=long_names | hostile_text,
    reason=long_names | hostile_text,
    usage=st.tuples(counts, counts),
    found=calls(),
)
def test_random_answers_always_end_the_run_with_a_valid_history(
    adapter, echo_registry, user, text, model, reason, usage, found
):
    make, shape = ADAPTERS[adapter]
    bodies = [shape(text, model, reason, usage, found)]

    def answer(request: httpx.Request) -> httpx.Response:
        body = bodies.pop(0) if bodies else shape("done", "m", "stop", (1, 1), [])
        return httpx.Response(200, content=json.dumps(body).encode())

    provider = make(httpx.Client(transport=httpx.MockTransport(answer)))
    conversation = Conversation.objects.create(owner=user)
    run = run_tool_loop(
        conversation=conversation, content="Go", provider=provider, max_iterations=2
    )
    run.refresh_from_db()
    assert run.status in TERMINAL
    for call in ToolCall.objects.filter(conversation=conversation):
        assert call.results.count() == 1, call.call_id
        assert call.status not in (ToolCall.Status.PENDING, ToolCall.Status.RUNNING)
