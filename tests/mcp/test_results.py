"""What the model reads of an MCP result: text, structured JSON, placeholders, isError."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from conversations.mcp.results import result_text
from conversations.tools import ToolError

PNG = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()


def test_text_blocks_are_joined_one_per_line():
    result = CallToolResult(content=[TextContent(text="one"), TextContent(text="two")])
    assert result_text(result) == "one\ntwo"


def test_structured_content_is_sent_as_compact_json():
    result = CallToolResult(
        content=[TextContent(text="ignored")], structured_content={"temp": 18, "city": "Köln"}
    )
    assert result_text(result) == '{"temp":18,"city":"Köln"}'


def test_binary_content_becomes_placeholders_naming_type_and_size():
    result = CallToolResult(
        content=[
            ImageContent(data=PNG, mime_type="image/png"),
            AudioContent(data=base64.b64encode(b"a" * 10).decode(), mime_type="audio/wav"),
            EmbeddedResource(
                resource=TextResourceContents(uri="file:///a.txt", text="héllo", mime_type=None)
            ),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///b.bin", blob=PNG, mime_type="application/octet-stream"
                )
            ),
            ResourceLink(name="c", uri="file:///c.pdf", mime_type="application/pdf", size=7),
        ]
    )
    assert result_text(result).splitlines() == [
        "[image: image/png, 100 bytes]",
        "[audio: audio/wav, 10 bytes]",
        "[resource: file:///a.txt, unknown type, 6 bytes]",
        "[resource: file:///b.bin, application/octet-stream, 100 bytes]",
        "[resource link: file:///c.pdf, application/pdf, 7 bytes]",
    ]


def test_is_error_raises_a_tool_error_with_the_servers_text():
    result = CallToolResult(content=[TextContent(text="no such city")], is_error=True)
    with pytest.raises(ToolError) as caught:
        result_text(result)
    assert caught.value.message == "no such city"


def test_is_error_without_text_still_says_it_failed():
    with pytest.raises(ToolError, match="reported an error without a message"):
        result_text(CallToolResult(content=[], is_error=True))
