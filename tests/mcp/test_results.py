"""What the model gets of an MCP result: text, structured JSON, files, placeholders, isError."""

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

from conversations.mcp.results import result_text, result_with_files
from conversations.tools import ToolError

from ..files import png

PNG = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
REAL_PNG = png()


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


def test_images_and_blobs_of_allowed_types_become_files_not_placeholders():
    encoded = base64.b64encode(REAL_PNG).decode()
    result = CallToolResult(
        content=[
            TextContent(text="see"),
            ImageContent(data=encoded, mime_type="image/png"),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///dir/shot.png", blob=encoded, mime_type="image/png"
                )
            ),
            # Not a type attachments allow, and not base64: both stay placeholders.
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///b.bin", blob=PNG, mime_type="application/octet-stream"
                )
            ),
            ImageContent(data="not base64!", mime_type="image/png"),
            AudioContent(data=encoded, mime_type="audio/wav"),
        ]
    )
    answer = result_with_files(result)
    assert [(f.media_type, f.name, f.data) for f in answer.files] == [
        ("image/png", "", REAL_PNG),
        ("image/png", "shot.png", REAL_PNG),
    ]
    assert answer.text.splitlines() == [
        "see",
        "[resource: file:///b.bin, application/octet-stream, 100 bytes]",
        "[image: image/png, 11 bytes]",
        f"[audio: audio/wav, {len(REAL_PNG)} bytes]",
    ]


def test_a_failed_result_has_no_files():
    encoded = base64.b64encode(REAL_PNG).decode()
    result = CallToolResult(
        content=[TextContent(text="broke"), ImageContent(data=encoded, mime_type="image/png")],
        is_error=True,
    )
    with pytest.raises(ToolError, match="broke"):
        result_with_files(result)
