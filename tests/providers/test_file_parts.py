"""Each adapter's native file parts, from the value objects (no DB, no HTTP).

User messages and tool results with an image and a PDF, mapped by each
adapter's pure conversion: the shapes its vendor documents, including the
tool results (Anthropic in the ``tool_result``, Gemini beside the
``functionResponse``, OpenAI chat in a user message after the results since
its tool messages take text only, Ollama ``images`` on the tool message).
"""

from __future__ import annotations

import base64

import pytest

from conversations.domain import ChatMessage, FilePart, InvalidArgumentError, ToolCall
from conversations.exceptions import AttachmentTooLarge
from conversations.providers.anthropic import anthropic_messages
from conversations.providers.gemini import gemini_contents
from conversations.providers.ollama import ollama_messages
from conversations.providers.openai import openai_messages
from conversations.providers.openai_responses import responses_input
from conversations.providers.parts import TOOL_FILES_TEXT, check_inline_limits, ollama_images

IMAGE = FilePart("image/png", b"\x89PNG fake image", name="chart.png")
DOCUMENT = FilePart("application/pdf", b"%PDF-1.4 fake", name="report.pdf")
IMAGE_B64 = base64.b64encode(IMAGE.data).decode()
DOCUMENT_B64 = base64.b64encode(DOCUMENT.data).decode()
CALL = ToolCall(id="call_1", name="draw_chart", arguments={})

TURN = [
    ChatMessage.user("Draw it"),
    ChatMessage.assistant_tool_calls([CALL]),
    ChatMessage.tool_result("call_1", "here is the chart", parts=[IMAGE]),
    ChatMessage.assistant("Done."),
]


def test_openai_chat_moves_a_tool_results_files_to_a_user_message_after_the_results():
    wire = openai_messages(TURN)
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "user", "assistant"]
    assert wire[2] == {"role": "tool", "content": "here is the chart", "tool_call_id": "call_1"}
    assert wire[3]["content"] == [
        {"type": "text", "text": TOOL_FILES_TEXT},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE_B64}"}},
    ]


def test_openai_chat_leaves_a_history_without_files_as_it_was():
    plain = [ChatMessage.user("a"), ChatMessage.assistant("b")]
    assert openai_messages(plain) == [m.to_dict() for m in plain]


def test_anthropic_puts_the_image_in_the_tool_result():
    wire = anthropic_messages(TURN)
    result = wire[2]["content"][0]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": [
            {"type": "text", "text": "here is the chart"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": IMAGE_B64},
            },
        ],
    }


def test_gemini_sends_the_files_after_the_function_response():
    contents = gemini_contents(TURN)
    parts = contents[2]["parts"]
    assert list(parts[0]) == ["functionResponse"]
    assert parts[1] == {"inlineData": {"mimeType": "image/png", "data": IMAGE_B64}}


def test_the_responses_api_puts_files_in_the_function_call_output():
    items = responses_input(TURN)
    output = next(item for item in items if item.get("type") == "function_call_output")
    assert output["output"] == [
        {"type": "input_text", "text": "here is the chart"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE_B64}"},
    ]


def test_ollama_puts_images_on_the_message_a_tool_results_too():
    wire = ollama_messages([ChatMessage.user("look", parts=[IMAGE]), *TURN[1:]])
    assert wire[0] == {"role": "user", "content": "look", "images": [IMAGE_B64]}
    assert wire[2]["images"] == [IMAGE_B64] and wire[2]["content"] == "here is the chart"


def test_ollama_never_gets_a_pdf_part():
    with pytest.raises(InvalidArgumentError) as info:
        ollama_images([DOCUMENT])
    assert info.value.code == "unsupported_part"


def test_anthropic_and_gemini_send_a_pdf_natively():
    message = [ChatMessage.user("read", parts=[DOCUMENT])]
    (anthropic,) = anthropic_messages(message)
    assert anthropic["content"][0]["type"] == "document"
    assert anthropic["content"][0]["source"]["data"] == DOCUMENT_B64
    (gemini,) = gemini_contents(message)
    assert gemini["parts"][0] == {
        "inlineData": {"mimeType": "application/pdf", "data": DOCUMENT_B64}
    }


def test_a_file_over_a_providers_inline_limit_is_refused_naming_it():
    big = FilePart("image/png", b"\x89PNG" + b"\x00" * (5 * 1024 * 1024), name="big.png")
    messages = [ChatMessage.user("a"), ChatMessage.user("b", parts=[IMAGE, big])]
    with pytest.raises(AttachmentTooLarge) as info:
        check_inline_limits(messages, provider_name="anthropic")
    assert (info.value.code, info.value.field) == ("attachment_too_large_for_provider", "1/parts/1")
    check_inline_limits(messages, provider_name="openai")  # 20 MB per image there
