"""A PDF's text, for a model that cannot read PDFs: bounded in pages, characters, size and time.

A PDF is a program of sorts: ten thousand pages, a page whose content
stream inflates to gigabytes, or a structure that sends a parser in
circles. The text is read with ``pypdf`` (pure Python, well kept) page by
page, stopping at ``PDF_TEXT_MAX_PAGES`` pages, ``PDF_TEXT_MAX_CHARS``
characters, or once ``PDF_TEXT_TIMEOUT_SECONDS`` have passed (checked
between pages). A page whose content inflates past :data:`MAX_PAGE_CONTENT_BYTES`
is skipped before ``pypdf`` inflates it (the inflation is measured with a
bounded ``zlib`` decompressor). A file that cannot be read at all gives no
text and says why, never an error: the run goes on.
"""

from __future__ import annotations

import io
import logging
import time
import zlib
from dataclasses import dataclass
from typing import Any, Final

from pypdf import PdfReader
from pypdf.generic import ArrayObject, StreamObject

__all__ = ["MAX_PAGE_CONTENT_BYTES", "PdfText", "extract_pdf_text"]

logger = logging.getLogger("conversations.attachments")

MAX_PAGE_CONTENT_BYTES: Final = 2 * 1024 * 1024
"""A page's content streams may inflate to this many bytes; a larger page is skipped."""


@dataclass(frozen=True, slots=True)
class PdfText:
    """What was read of a PDF."""

    text: str
    """The text of the pages read, pages separated by a blank line."""
    pages_read: int
    """How many pages were read (skipped ones included)."""
    pages_total: int
    """How many pages the document has (0 when it could not be opened)."""
    skipped: int = 0
    """Pages left out because their content was too large or unreadable."""
    stopped: str = ""
    """Why reading stopped before the end: ``pages``, ``characters``, ``time`` or ``error``."""


def _inflated_size(stream: Any, limit: int) -> int:
    """The size ``stream`` inflates to, counted up to ``limit + 1`` (never more is inflated)."""
    filters = stream.get("/Filter")
    names = list(filters) if isinstance(filters, ArrayObject) else [filters] if filters else []
    raw = stream._data  # the stored, still compressed bytes
    if not names:
        return len(raw)
    if names != ["/FlateDecode"]:
        # Other filters are rare in content streams; pypdf bounds their output itself.
        return 0
    inflater = zlib.decompressobj()
    try:
        return len(inflater.decompress(raw, limit + 1))
    except zlib.error:
        return 0


def _page_too_large(page: Any) -> bool:
    contents = page.get("/Contents")
    if contents is None:
        return False
    contents = contents.get_object()
    streams = contents if isinstance(contents, ArrayObject) else [contents]
    total = 0
    for item in streams:
        stream = item.get_object()
        if isinstance(stream, StreamObject):
            total += _inflated_size(stream, MAX_PAGE_CONTENT_BYTES - total)
            if total > MAX_PAGE_CONTENT_BYTES:
                return True
    return False


def extract_pdf_text(
    data: bytes, *, max_pages: int, max_chars: int, timeout: float, clock: Any = time.monotonic
) -> PdfText:
    """The text of at most ``max_pages`` pages and ``max_chars`` characters of the PDF ``data``.

    ``timeout`` (seconds, by ``clock``) is checked before each page: a page
    already started is finished. Never raises for a broken or hostile file.
    """
    deadline = clock() + timeout
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        total = len(reader.pages)
    except Exception:
        logger.info("a PDF attachment could not be opened", exc_info=True)
        return PdfText("", 0, 0, stopped="error")
    texts: list[str] = []
    length = read = skipped = 0
    stopped = ""
    for index in range(total):
        if read >= max_pages:
            stopped = "pages"
            break
        if clock() > deadline:
            stopped = "time"
            break
        read += 1
        try:
            page = reader.pages[index]
            if _page_too_large(page):
                skipped += 1
                continue
            text = page.extract_text() or ""
        except Exception:
            logger.info("page %d of a PDF attachment could not be read", index + 1, exc_info=True)
            skipped += 1
            continue
        text = text.strip()
        if not text:
            continue
        if length + len(text) > max_chars:
            texts.append(text[: max(0, max_chars - length)])
            stopped = "characters"
            break
        texts.append(text)
        length += len(text) + 2
    return PdfText("\n\n".join(texts), read, total, skipped, stopped)
