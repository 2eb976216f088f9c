"""File parts of a message (an image, a PDF, a text file) and their OpenAI wire shape.

A :class:`FilePart` travels beside a message's text. Read from the history it
usually carries only a reference (``attachment_id``, ``size``) and no bytes:
the loop loads the bytes, or replaces the part with a fallback the model can
read, just before a provider call. The OpenAI shape of a message with parts,
a content array of ``text``, ``image_url`` (a data URL) and ``file``
(``filename`` and ``file_data``, a data URL), is made and read here and
nowhere else; every adapter converts from the value objects.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from conversations.exceptions import InvalidArgumentError

__all__ = [
    "IMAGE_TYPES",
    "PDF_TYPE",
    "TEXT_TYPES",
    "FilePart",
    "content_from_wire",
    "content_to_wire",
    "data_url",
    "parse_data_url",
]

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types providers read natively (and the chat page shows inline)."""
PDF_TYPE = "application/pdf"
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/csv", "application/json"})
"""Text files: every model reads them, as text."""


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


@dataclass(frozen=True, slots=True)
class FilePart:
    """One file of a message: its media type, its bytes (or a reference to them) and its name."""

    media_type: str
    """The sniffed media type (``image/png``, ``application/pdf``, ...)."""
    data: bytes
    """The bytes; ``b""`` when the part is only a reference not loaded yet (see ``size``)."""
    name: str = ""
    """The file's (sanitised) name, for the model and for people."""
    attachment_id: str | None = None
    """The stored ``Attachment`` this part is, if any (its UUID as text)."""
    size: int | None = None
    """The size in bytes; taken from ``data`` when it holds them."""

    def __post_init__(self) -> None:
        if not isinstance(self.media_type, str) or "/" not in self.media_type:
            raise InvalidArgumentError(
                f"a file part needs a media type such as image/png, got {self.media_type!r}",
                code="invalid_media_type",
                field="media_type",
            )
        data = self.data
        if isinstance(data, bytearray | memoryview):
            object.__setattr__(self, "data", bytes(data))
        elif not isinstance(data, bytes):
            raise InvalidArgumentError(
                f"file part data must be bytes, got {_type_name(data)}",
                code="invalid_file_data",
                field="data",
            )
        if not isinstance(self.name, str):
            raise InvalidArgumentError(
                f"a file part's name must be a string, got {_type_name(self.name)}",
                code="invalid_file_name",
                field="name",
            )
        if self.attachment_id is not None:
            if not isinstance(self.attachment_id, str):
                # A UUID is accepted and kept as its text.
                object.__setattr__(self, "attachment_id", str(self.attachment_id))
            if not self.attachment_id:
                raise InvalidArgumentError(
                    "attachment_id must be a non-empty string or None",
                    code="invalid_attachment_id",
                    field="attachment_id",
                )
        if self.data:
            if self.size is not None and self.size != len(self.data):
                raise InvalidArgumentError(
                    f"size {self.size} does not match the {len(self.data)} bytes of data",
                    code="invalid_file_size",
                    field="size",
                )
            object.__setattr__(self, "size", len(self.data))
        elif self.size is None:
            object.__setattr__(self, "size", 0)
        elif isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise InvalidArgumentError(
                f"size must be a non-negative integer, got {self.size!r}",
                code="invalid_file_size",
                field="size",
            )
        elif self.size and self.attachment_id is None:
            raise InvalidArgumentError(
                "a file part without data must reference an attachment",
                code="invalid_file_data",
                field="data",
            )

    @property
    def loaded(self) -> bool:
        """Whether ``data`` holds the bytes (a reference read from the history has none)."""
        return len(self.data) == self.size

    @property
    def kind(self) -> str:
        """``image``, ``pdf``, ``text`` or ``file``: what a model must be able to read."""
        if self.media_type in IMAGE_TYPES:
            return "image"
        if self.media_type == PDF_TYPE:
            return "pdf"
        if self.media_type in TEXT_TYPES:
            return "text"
        return "file"

    def with_data(self, data: bytes) -> FilePart:
        """The same part holding its bytes."""
        return replace(self, data=data, size=None)

    def data_url(self) -> str:
        """``data:<media type>;base64,<bytes>``."""
        return data_url(self.media_type, self.data)


def data_url(media_type: str, data: bytes) -> str:
    """A base64 ``data:`` URL of ``data``."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def parse_data_url(url: str, *, field: str) -> tuple[str, bytes]:
    """``(media type, bytes)`` of a base64 ``data:`` URL; anything else is refused.

    Only data URLs: a part never makes the server fetch a URL.
    """
    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
        raise InvalidArgumentError(
            "a file must be sent as a base64 data: URL (no other URL is fetched)",
            code="unsupported_file_url",
            field=field,
        )
    header, _, payload = url[5:].partition(",")
    media_type, _, encoding = header.partition(";")
    if encoding != "base64" or "/" not in media_type:
        raise InvalidArgumentError(
            "a data: URL must be data:<media type>;base64,<data>",
            code="unsupported_file_url",
            field=field,
        )
    try:
        return media_type, base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgumentError(
            "the data: URL is not valid base64", code="invalid_file_data", field=field
        ) from None


def content_to_wire(content: str, parts: Sequence[FilePart]) -> str | list[dict[str, Any]]:
    """A message's OpenAI ``content``: the text alone, or an array when there are parts."""
    if not parts:
        return content
    items: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    for index, part in enumerate(parts):
        if not part.loaded:
            # Never an empty data URL standing for a file: load the bytes first.
            raise InvalidArgumentError(
                "a file part's bytes are not loaded (load the attachment first)",
                code="part_not_loaded",
                field=f"parts/{index}",
            )
        if part.kind == "image":
            items.append({"type": "image_url", "image_url": {"url": part.data_url()}})
        else:
            items.append(
                {
                    "type": "file",
                    "file": {"filename": part.name or "file", "file_data": part.data_url()},
                }
            )
    return items


def content_from_wire(items: Iterable[Any]) -> tuple[str, tuple[FilePart, ...]]:
    """The text and parts of an OpenAI content array (the inverse of :func:`content_to_wire`)."""
    texts: list[str] = []
    parts: list[FilePart] = []
    for index, item in enumerate(items):
        where = f"content/{index}"
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "text" and isinstance(item.get("text"), str):
            texts.append(item["text"])
        elif kind == "image_url" and isinstance(item.get("image_url"), Mapping):
            media_type, data = parse_data_url(item["image_url"].get("url"), field=where)
            parts.append(FilePart(media_type, data))
        elif kind == "file" and isinstance(item.get("file"), Mapping):
            file = item["file"]
            media_type, data = parse_data_url(file.get("file_data"), field=where)
            name = file.get("filename")
            parts.append(FilePart(media_type, data, name=name if isinstance(name, str) else ""))
        else:
            raise InvalidArgumentError(
                "a content part must be a text, image_url or file object",
                code="invalid_content_part",
                field=where,
            )
    return "\n".join(texts), tuple(parts)
