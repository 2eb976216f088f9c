"""What the model gets of an MCP tool result: text, structured content as JSON, files, placeholders.

Images and embedded resources with a blob of a type ``ATTACHMENT_TYPES``
allows become files of a :class:`~conversations.tools.ToolResult` (stored as
attachments by the loop, sent natively to the model); other binary content
(audio, a blob of another type or not valid base64) is a placeholder naming
its type and size.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

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

from conversations.conf import app_settings
from conversations.domain import FilePart
from conversations.exceptions import InvalidArgumentError
from conversations.tools import ToolError, ToolResult

__all__ = ["result_text", "result_with_files"]

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


def _file(block: Any) -> FilePart | None:
    """The file an image or blob block is, or ``None`` when it stays a placeholder."""
    if isinstance(block, ImageContent):
        data, media_type, name = block.data, block.mime_type, ""
    elif isinstance(block, EmbeddedResource) and isinstance(block.resource, BlobResourceContents):
        resource = block.resource
        data, media_type = resource.blob, resource.mime_type or ""
        name = str(resource.uri).rstrip("/").rpartition("/")[2]
    else:
        return None
    if media_type not in app_settings().ATTACHMENT_TYPES:
        return None
    try:
        decoded = base64.b64decode(data, validate=True)
        return FilePart(media_type, decoded, name=name) if decoded else None
    except (binascii.Error, ValueError, InvalidArgumentError):
        return None


def result_with_files(result: CallToolResult) -> ToolResult:
    """:func:`result_text`, with images and blobs of an allowed type as files, not placeholders.

    The text is what :func:`result_text` gives less the placeholders of the
    blocks that became files (which the model sees natively instead).
    """
    if result.is_error:
        return ToolResult(result_text(result))
    files: list[FilePart] = []
    kept: list[Any] = []
    for block in result.content:
        part = _file(block)
        if part is None:
            kept.append(block)
        else:
            files.append(part)
    if result.structured_content is not None:
        return ToolResult(result_text(result), files)
    return ToolResult("\n".join(_block_text(block) for block in kept), files)
