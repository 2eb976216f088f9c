"""File parts at the providers' boundary: what each adapter sends natively, how large, in base64.

Each adapter turns a message's :class:`~conversations.domain.FilePart` values
into its vendor's native shape (OpenAI ``image_url``/``file``, Anthropic
``image``/``document`` blocks, Gemini ``inlineData``, Ollama ``images``).
:data:`NATIVE_KINDS` says which kinds of part an adapter can send at all
(the loop sends a readable fallback for the others, and for the kinds the
language model does not take); :data:`INLINE_LIMITS` the vendors' documented
limits on inline data, checked before a request is sent
(``attachment_too_large_for_provider``) rather than learnt from a 400.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from conversations.domain import ChatMessage, FilePart, InvalidArgumentError, Role
from conversations.domain.parts import content_to_wire
from conversations.exceptions import AttachmentTooLarge

__all__ = [
    "INLINE_LIMITS",
    "NATIVE_KINDS",
    "TOOL_FILES_TEXT",
    "InlineLimits",
    "anthropic_blocks",
    "base64_data",
    "check_inline_limits",
    "gemini_parts",
    "native_kinds",
    "ollama_images",
    "openai_tool_files",
    "responses_content",
]

TOOL_FILES_TEXT: Final = "Files returned by the tool calls above:"
"""Opens the user message that carries tool results' files where tool messages take text only."""

_MB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class InlineLimits:
    """A vendor's limits on the files of one request, in bytes before base64."""

    per_image: int
    """Largest image."""
    per_document: int
    """Largest PDF."""
    per_request: int
    """All the files of one request together."""


NATIVE_KINDS: Final[dict[str, frozenset[str]]] = {
    "openai": frozenset({"image", "pdf"}),
    "openai_responses": frozenset({"image", "pdf"}),
    "anthropic": frozenset({"image", "pdf"}),
    "gemini": frozenset({"image", "pdf"}),
    "ollama": frozenset({"image"}),
}
"""The kinds of part each adapter (by ``provider_name``) sends natively; others get fallbacks."""

INLINE_LIMITS: Final[dict[str, InlineLimits]] = {
    "openai": InlineLimits(per_image=20 * _MB, per_document=32 * _MB, per_request=50 * _MB),
    "openai_responses": InlineLimits(
        per_image=20 * _MB, per_document=32 * _MB, per_request=50 * _MB
    ),
    "anthropic": InlineLimits(per_image=5 * _MB, per_document=32 * _MB, per_request=32 * _MB),
    # Inline data counts against the request's 20 MB (base64 included, about 4/3).
    "gemini": InlineLimits(per_image=15 * _MB, per_document=15 * _MB, per_request=15 * _MB),
    "ollama": InlineLimits(per_image=20 * _MB, per_document=0, per_request=50 * _MB),
}
"""Per adapter (``provider_name``): the vendors' documented limits, rounded down."""


def native_kinds(provider_name: str) -> frozenset[str]:
    """The kinds of part the adapter ``provider_name`` sends natively (none if unknown)."""
    return NATIVE_KINDS.get(provider_name, frozenset())


def base64_data(part: FilePart) -> str:
    """The part's bytes in base64 (they must be loaded)."""
    if not part.loaded:
        raise ValueError("the part's bytes are not loaded")
    return base64.b64encode(part.data).decode("ascii")


def check_inline_limits(messages: Sequence[ChatMessage], *, provider_name: str) -> None:
    """Raise :class:`AttachmentTooLarge` (``attachment_too_large_for_provider``) when a part
    or the parts of the request together exceed the adapter's limits.

    ``field`` locates the first part over a limit: ``<message index>/parts/<part index>``.
    """
    limits = INLINE_LIMITS.get(provider_name)
    if limits is None:
        return
    total = 0
    for index, message in enumerate(messages):
        for position, part in enumerate(message.parts):
            size = part.size or 0
            limit = limits.per_image if part.kind == "image" else limits.per_document
            total += size
            if size > limit:
                detail = (
                    f"the file {part.name or part.media_type} is {size} bytes; {provider_name} takes "
                    f"files of at most {limit} bytes inline"
                )
            elif total > limits.per_request:
                detail = (
                    f"the files of this request are {total} bytes together; {provider_name} "
                    f"takes at most {limits.per_request} bytes inline"
                )
            else:
                continue
            raise AttachmentTooLarge(
                detail, code="attachment_too_large_for_provider", field=f"{index}/parts/{position}"
            )


def _unsupported(part: FilePart, adapter: str, index: int) -> InvalidArgumentError:
    # The loop sends a fallback for every kind an adapter cannot send: reaching here is a bug.
    return InvalidArgumentError(
        f"{adapter} cannot send a {part.media_type} part",
        code="unsupported_part",
        field=f"parts/{index}",
    )


def openai_tool_files(
    messages: Sequence[ChatMessage], wire: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """OpenAI chat ``messages`` (``wire``, one per message) with tool messages' files moved out.

    A tool message takes text only: its files follow the turn's results in
    one user message (the text :data:`TOOL_FILES_TEXT`, then the parts in
    the one OpenAI shape, ``domain.parts.content_to_wire``).
    """
    if not any(message.role is Role.TOOL and message.parts for message in messages):
        return wire
    result: list[dict[str, Any]] = []
    pending: list[FilePart] = []
    for message, item in zip(messages, wire, strict=True):
        if pending and message.role is not Role.TOOL:
            result.append({"role": "user", "content": content_to_wire(TOOL_FILES_TEXT, pending)})
            pending = []
        if message.role is Role.TOOL and message.parts:
            item = {**item, "content": message.content}
            pending.extend(message.parts)
        result.append(item)
    if pending:
        result.append({"role": "user", "content": content_to_wire(TOOL_FILES_TEXT, pending)})
    return result


def responses_content(content: str, parts: Sequence[FilePart]) -> str | list[dict[str, Any]]:
    """A Responses API message's ``content``: the text alone, or ``input_*`` items with parts."""
    if not parts:
        return content
    items: list[dict[str, Any]] = [{"type": "input_text", "text": content}] if content else []
    for index, part in enumerate(parts):
        if part.kind == "image":
            items.append({"type": "input_image", "image_url": part.data_url()})
        elif part.kind == "pdf":
            items.append(
                {
                    "type": "input_file",
                    "filename": part.name or "document.pdf",
                    "file_data": part.data_url(),
                }
            )
        else:
            raise _unsupported(part, "openai_responses", index)
    return items


def anthropic_blocks(parts: Sequence[FilePart], *, text: str = "") -> list[dict[str, Any]]:
    """Anthropic ``image`` and ``document`` blocks (base64 sources) of ``parts``, then ``text``
    as a ``text`` block unless it is blank (the API refuses blank text)."""
    blocks: list[dict[str, Any]] = []
    for index, part in enumerate(parts):
        source = {"type": "base64", "media_type": part.media_type, "data": base64_data(part)}
        if part.kind == "image":
            blocks.append({"type": "image", "source": source})
        elif part.kind == "pdf":
            block: dict[str, Any] = {"type": "document", "source": source}
            if part.name:
                block["title"] = part.name
            blocks.append(block)
        else:
            raise _unsupported(part, "anthropic", index)
    if text.strip():
        blocks.append({"type": "text", "text": text})
    return blocks


def gemini_parts(parts: Sequence[FilePart], *, text: str = "") -> list[dict[str, Any]]:
    """Gemini ``inlineData`` parts of ``parts`` (images and PDFs alike), then ``text`` as a
    ``text`` part unless it is blank (Gemini refuses empty text)."""
    result: list[dict[str, Any]] = []
    for index, part in enumerate(parts):
        if part.kind not in ("image", "pdf"):
            raise _unsupported(part, "gemini", index)
        result.append({"inlineData": {"mimeType": part.media_type, "data": base64_data(part)}})
    if text.strip():
        result.append({"text": text})
    return result


def ollama_images(parts: Sequence[FilePart]) -> list[str]:
    """Ollama's ``images`` of a message: each image's base64 (Ollama takes images only)."""
    for index, part in enumerate(parts):
        if part.kind != "image":
            raise _unsupported(part, "ollama", index)
    return [base64_data(part) for part in parts]
