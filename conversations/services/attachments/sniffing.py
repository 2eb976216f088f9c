"""What a file is, told from its bytes: the media type an upload is stored and checked with.

The client's ``Content-Type`` and file name are never trusted for what a file
is. Binary formats are recognised by their signatures (``puremagic``, a pure
Python library of magic numbers). A file that is entirely UTF-8 text without
NUL bytes is text; only then does the name's extension choose among the text
types (Markdown, CSV, JSON or plain text), which changes how it is shown,
never whether it is safe. Text that is markup (HTML, SVG, XML) or a script
with a ``#!`` line is reported as what it is, so the allow-list refuses it.
"""

from __future__ import annotations

import codecs
import unicodedata
from typing import Final

import puremagic

from conversations.domain.parts import IMAGE_TYPES, PDF_TYPE

__all__ = [
    "HEAD_BYTES",
    "NEVER_ALLOWED",
    "TextProbe",
    "sanitise_name",
    "sniff_media_type",
]

HEAD_BYTES: Final = 8192
"""How much of a file's start the signatures are read from."""

NEVER_ALLOWED: Final = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "image/svg+xml",
        "text/xml",
        "application/xml",
        "text/javascript",
        "application/javascript",
        "text/x-shellscript",
        "application/x-executable",
        "application/x-elf",
        "application/x-msdownload",
        "application/vnd.microsoft.portable-executable",
        "application/x-mach-binary",
        "application/octet-stream",
    }
)
"""Types refused whatever ``ATTACHMENT_TYPES`` says: a browser may run them, or a machine."""

_SIGNED: Final = IMAGE_TYPES | {PDF_TYPE}
"""Binary types whose signature decides, even when the bytes also happen to be text."""

_MARKUP: Final = (
    (b"<svg", "image/svg+xml"),
    (b"<!doctype html", "text/html"),
    (b"<html", "text/html"),
    (b"<head", "text/html"),
    (b"<body", "text/html"),
    (b"<script", "text/html"),
    (b"<iframe", "text/html"),
    (b"<?xml", "text/xml"),
)

_TEXT_BY_EXTENSION: Final = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
}


class TextProbe:
    """Fed a file's chunks in order, tells whether all of it is UTF-8 text without NUL bytes."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.is_text = True

    def feed(self, chunk: bytes, *, final: bool = False) -> None:
        """Take the next chunk (``final`` on the last, possibly empty, one)."""
        if not self.is_text:
            return
        if b"\x00" in chunk:
            self.is_text = False
            return
        try:
            self._decoder.decode(chunk, final)
        except UnicodeDecodeError:
            self.is_text = False


def _signature(head: bytes) -> str:
    try:
        return str(puremagic.from_string(head, mime=True) or "")
    except (puremagic.PureError, ValueError):
        return ""


def sniff_media_type(head: bytes, *, is_text: bool, name: str = "") -> str:
    """The media type of a file starting with ``head`` (``is_text``: see :class:`TextProbe`).

    ``application/octet-stream`` when nothing is recognised.
    """
    signature = _signature(head)
    if signature in _SIGNED:
        return signature
    if is_text:
        start = head[:2048].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
        if start.startswith(b"<"):
            # Text that opens with a tag is read as a browser would read it.
            for marker, media_type in _MARKUP:
                if marker in start:
                    return "image/svg+xml" if b"<svg" in start else media_type
        if start.startswith(b"#!"):
            return "text/x-shellscript"
        dot = name.rfind(".")
        extension = name[dot:].lower() if dot > 0 else ""
        return _TEXT_BY_EXTENSION.get(extension, "text/plain")
    return signature or "application/octet-stream"


def sanitise_name(name: str, *, limit: int = 255) -> str:
    """A file name safe to store and show: no path, no control characters, at most ``limit``."""
    name = unicodedata.normalize("NFC", str(name or ""))
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip().lstrip(".")
    if len(name) > limit:
        dot = name.rfind(".")
        extension = name[dot:] if dot > 0 and len(name) - dot <= 16 else ""
        name = name[: limit - len(extension)] + extension
    return name
