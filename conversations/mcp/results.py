"""What the model reads of an MCP tool result: text, structured content as JSON, placeholders."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from mcp.types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from conversations.tools import ToolError

__all__ = ["result_text"]

# Said when a failing tool gave no text at all; the model still learns it failed.
_NO_ERROR_TEXT = "the MCP server reported an error without a message"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data.encode("utf-8"))


def _block_text(block: Any) -> str:
    """A content block as text; binary content becomes a placeholder naming type and size."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return f"[image: {block.mime_type}, {_decoded_size(block.data)} bytes]"
    if isinstance(block, AudioContent):
        return f"[audio: {block.mime_type}, {_decoded_size(block.data)} bytes]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            size = len(resource.text.encode("utf-8"))
        else:
            size = _decoded_size(resource.blob)
        mime = resource.mime_type or "unknown type"
        return f"[resource: {resource.uri}, {mime}, {size} bytes]"
    if isinstance(block, ResourceLink):
        mime = block.mime_type or "unknown type"
        known = f", {block.size} bytes" if block.size is not None else ""
        return f"[resource link: {block.uri}, {mime}{known}]"
    return f"[{type(block).__name__}]"


def result_text(result: CallToolResult) -> str:
    """The tool message's text for ``result``; raises :class:`ToolError` when it ``isError``.

    Structured content, when present, is the result (as compact JSON): it is
    what the server meant to be read by a program, and its text blocks usually
    repeat it. Otherwise the blocks are joined, one per line.
    """
    if result.is_error:
        text = "\n".join(_block_text(block) for block in result.content).strip()
        raise ToolError(text or _NO_ERROR_TEXT)
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    return "\n".join(_block_text(block) for block in result.content)
