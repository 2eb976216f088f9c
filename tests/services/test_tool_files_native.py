"""A tool's picture reaches the next request natively: each vendor's shape, captured at the wire.

A Python tool returns a PNG; the model's next request carries it as the
vendor documents files in tool results: Anthropic an ``image`` block in the
``tool_result``, Gemini ``inlineData`` after the ``functionResponse``, OpenAI
chat (whose tool messages take text only) a user message with an
``image_url`` after the results. The adapters talk to an ``httpx``
``MockTransport`` that records each request body.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from conversations.domain import FilePart
from conversations.models import (
    LanguageModel,
    Message,
    MessageAttachment,
    Profile,
    Provider,
    Run,
)
from conversations.providers import AnthropicProvider, GeminiProvider, OpenAIProvider
from conversations.services import run_tool_loop
from conversations.tools import ToolResult, registry, tool
from tests.providers.mock_http import Recorder

from ..files import png

pytestmark = pytest.mark.django_db(transaction=True)

PICTURE = png(width=3, height=3)
ENCODED = base64.b64encode(PICTURE).decode()


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def chart_tool():
    with registry.isolated(empty=True) as tools:

        @tool(registry=tools)
        def chart() -> ToolResult:
            """Draw the chart."""
            return ToolResult("the chart", files=[FilePart("image/png", PICTURE, name="c.png")])

        yield tools


def anthropic_replies():
    usage = {"input_tokens": 10, "output_tokens": 5}
    calling = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "chart", "input": {}}],
        "stop_reason": "tool_use",
        "usage": usage,
    }
    answer = {
        **calling,
        "id": "msg_2",
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "A chart."}],
    }
    return calling, answer


def openai_replies():
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    call = {"id": "call_1", "type": "function", "function": {"name": "chart", "arguments": "{}"}}
    calling = {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "usage": usage,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ],
    }
    answer = {
        **calling,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "A chart."},
            }
        ],
    }
    return calling, answer


def gemini_replies():
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
    calling = {
        "candidates": [
            {
                "finishReason": "STOP",
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "chart", "args": {}}}],
                },
            }
        ],
        "usageMetadata": usage,
    }
    answer = {
        "candidates": [
            {"finishReason": "STOP", "content": {"role": "model", "parts": [{"text": "A chart."}]}}
        ],
        "usageMetadata": usage,
    }
    return calling, answer


ADAPTERS = {
    "anthropic": (AnthropicProvider, anthropic_replies),
    "openai": (OpenAIProvider, openai_replies),
    "gemini": (GeminiProvider, gemini_replies),
}


def run_with(adapter, user, chart_tool):
    provider_class, replies = ADAPTERS[adapter]
    record = Provider.objects.create(slug=adapter, name=adapter, adapter=adapter)
    model = LanguageModel.objects.create(
        provider=record, model_id="m", input_modalities=["image", "pdf"]
    )
    profile = Profile.objects.create(slug="p", name="p", language_model=model, stream=False)
    recorder = Recorder(*(httpx.Response(200, json=body) for body in replies()), strict=True)
    from conversations.services import create_conversation

    conversation = create_conversation(owner=user, title="t", profile=profile)
    finished = run_tool_loop(
        conversation=conversation,
        content="Draw it",
        profile=profile,
        provider=provider_class(api_key="k", http_client=recorder.client),
    )
    assert finished.status == Run.Status.COMPLETED, finished.error_message
    assert MessageAttachment.objects.filter(message__role="tool").count() == 1
    return recorder.bodies[1]


def test_anthropic_gets_the_picture_in_the_tool_result(user, chart_tool):
    body = run_with("anthropic", user, chart_tool)
    result = body["messages"][2]["content"][0]
    assert result["type"] == "tool_result"
    images = [block for block in result["content"] if block["type"] == "image"]
    assert images == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ENCODED}}
    ]


def test_gemini_gets_the_picture_as_inline_data_beside_the_function_response(user, chart_tool):
    body = run_with("gemini", user, chart_tool)
    parts = body["contents"][2]["parts"]
    assert "functionResponse" in parts[0]
    assert {"inlineData": {"mimeType": "image/png", "data": ENCODED}} in parts


def test_openai_chat_gets_the_picture_as_a_user_part_after_the_results(user, chart_tool):
    body = run_with("openai", user, chart_tool)
    roles = [message["role"] for message in body["messages"]]
    assert roles[-2:] == ["tool", "user"]
    assert body["messages"][-2]["content"] == "the chart"
    url = f"data:image/png;base64,{ENCODED}"
    assert {"type": "image_url", "image_url": {"url": url}} in body["messages"][-1]["content"]
    # The stored messages never hold the bytes: the tool message references the file.
    stored = json.dumps(list(Message.objects.values("content", "provider_metadata")))
    assert ENCODED[:40] not in stored
