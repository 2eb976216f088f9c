"""What a model is sent of a message's files: native parts it reads, readable text for the rest.

Just before a provider call the loop hands the history here. The parts'
bytes are loaded; a part the language model takes (``input_modalities``)
and its adapter can send (``providers.parts.NATIVE_KINDS``) stays a part;
every other one becomes text appended to the message, so a model never
gets a part it cannot read and the run never fails on a provider's 400:

- a PDF: its extracted text (``pdf_text``, bounded), with a line saying so;
- an image: a note with its name, type and size;
- a text file (plain, Markdown, CSV, JSON): its text, for every model;
- an attachment deleted meanwhile: a note that it is gone.

Then the adapter's inline limits are checked (``attachment_too_large_for_provider``).
Nothing here writes: the stored history keeps its references.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from conversations.conf import app_settings
from conversations.domain import ChatMessage, FilePart
from conversations.exceptions import AttachmentTooLarge
from conversations.providers.parts import check_inline_limits, native_kinds

from .pdf_text import extract_pdf_text
from .reading import load_parts

__all__ = ["MODALITIES", "TEXT_CACHE_SIZE", "fallback_text", "prepare_for_model"]

MODALITIES = frozenset({"image", "pdf"})
"""What ``LanguageModel.input_modalities`` may list (text is always read)."""


def prepare_for_model(
    messages: Sequence[ChatMessage], *, modalities: Collection[str], provider_name: str
) -> list[ChatMessage]:
    """``messages`` as ``provider_name`` is sent them for a model taking ``modalities``.

    Messages without parts are passed through untouched (no query, no read).
    Only the bytes a request needs are read (one query, then one read per
    attachment): those of native parts, and of PDFs and text files whose
    text this process has not extracted yet (it keeps the last
    :data:`TEXT_CACHE_SIZE`, so the rounds of a run extract a PDF once). An
    image's note needs no bytes.
    """
    if not any(message.parts for message in messages):
        return list(messages)
    native = frozenset(modalities) & native_kinds(provider_name)
    wanted = [
        part
        for message in messages
        for part in message.parts
        if not part.loaded and _needs_bytes(part, native)
    ]
    loaded: dict[str | None, FilePart] = {}
    if wanted:
        (holder,) = load_parts([ChatMessage.user("", parts=wanted)])
        loaded = {part.attachment_id: part for part in holder.parts if part.loaded}
    prepared: list[ChatMessage] = []
    for message in messages:
        if not message.parts:
            prepared.append(message)
            continue
        kept: list[FilePart] = []
        texts: list[str] = [message.content] if message.content else []
        for part in message.parts:
            part = part if part.loaded else loaded.get(part.attachment_id, part)
            if part.kind not in native:
                texts.append(fallback_text(part))
            elif part.loaded:
                kept.append(part)
            else:
                texts.append(_gone(part))
        prepared.append(replace(message, content="\n\n".join(texts), parts=tuple(kept)))
    try:
        check_inline_limits(prepared, provider_name=provider_name)
    except AttachmentTooLarge as exc:
        # Its field locates the part in the provider's history, which no caller sees:
        # the message names the file instead.
        raise AttachmentTooLarge(exc.detail, code=exc.code) from None
    return prepared


TEXT_CACHE_SIZE = 64
"""How many extracted texts (of PDFs and text files, by attachment) a process keeps."""

_texts: OrderedDict[tuple[Any, ...], str] = OrderedDict()
_texts_lock = threading.Lock()


def _text_key(part: FilePart) -> tuple[Any, ...] | None:
    if part.attachment_id is None or part.kind not in ("pdf", "text"):
        return None
    settings = app_settings()
    bounds = (settings.PDF_TEXT_MAX_PAGES, settings.PDF_TEXT_MAX_CHARS)
    return (part.attachment_id, part.size, part.name, *bounds)


def _cached_text(part: FilePart) -> str | None:
    key = _text_key(part)
    if key is None:
        return None
    with _texts_lock:
        text = _texts.get(key)
        if text is not None:
            _texts.move_to_end(key)
        return text


def _remember_text(part: FilePart, text: str) -> None:
    key = _text_key(part)
    if key is None:
        return
    with _texts_lock:
        _texts[key] = text
        _texts.move_to_end(key)
        while len(_texts) > TEXT_CACHE_SIZE:
            _texts.popitem(last=False)


def _needs_bytes(part: FilePart, native: frozenset[str]) -> bool:
    if part.kind in native:
        return True
    return part.kind in ("pdf", "text") and _cached_text(part) is None


def fallback_text(part: FilePart) -> str:
    """What a model that cannot take ``part`` reads instead (the text of a stored PDF or
    text file extracted once per process, see :data:`TEXT_CACHE_SIZE`)."""
    cached = _cached_text(part)
    if cached is not None:
        return cached
    text = _fallback_text(part)
    if part.loaded:
        _remember_text(part, text)
    return text


def _gone(part: FilePart) -> str:
    return f"[Attachment {part.name or 'unnamed'} ({part.media_type}) is no longer available.]"


def _fallback_text(part: FilePart) -> str:
    name = part.name or "unnamed"
    if part.kind == "image":
        return (
            f"[Image {name} ({part.media_type}, {part.size} bytes) attached: "
            "this model cannot see images.]"
        )
    if not part.loaded:
        return _gone(part)
    settings = app_settings()
    if part.kind == "pdf":
        pdf = extract_pdf_text(
            part.data,
            max_pages=settings.PDF_TEXT_MAX_PAGES,
            max_chars=settings.PDF_TEXT_MAX_CHARS,
            timeout=settings.PDF_TEXT_TIMEOUT_SECONDS,
        )
        if not pdf.pages_total:
            return f"[PDF {name}, {part.size} bytes: its text could not be extracted.]"
        heading = (
            f"[PDF {name}: this model cannot read PDFs, so here is the text extracted from "
            f"pages 1-{pdf.pages_read} of {pdf.pages_total}"
        )
        if pdf.skipped:
            heading += f" ({pdf.skipped} page(s) too large or unreadable, left out)"
        if pdf.stopped == "characters":
            heading += f", cut at {settings.PDF_TEXT_MAX_CHARS} characters"
        heading += ".]"
        return f"{heading}\n{pdf.text}" if pdf.text else f"{heading}\n(no text found)"
    if part.kind == "text":
        text = part.data.decode("utf-8", errors="replace")
        limit = settings.PDF_TEXT_MAX_CHARS
        cut = f", cut at {limit} characters" if len(text) > limit else ""
        return f"[File {name} ({part.media_type}){cut}:]\n{text[:limit]}"
    return f"[File {name} ({part.media_type}, {part.size} bytes) attached: not readable here.]"
