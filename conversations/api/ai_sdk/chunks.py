"""What the UI message stream and the history share: ids, reasoning, finish reasons, errors.

The AI SDK's UI message stream is Server-Sent Events whose ``data:`` lines
are JSON chunks, ended by ``data: [DONE]``, with the header
``x-vercel-ai-ui-message-stream: v1``.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from conversations.exceptions import BudgetExceeded, ConversationsError, ProviderError
from conversations.models import Message, Run

__all__ = [
    "DONE",
    "FAILED_STATUSES",
    "HEADERS",
    "Chunk",
    "encode",
    "error_text",
    "finish_reason",
    "run_message_id",
    "source_urls",
    "thinking_texts",
]

HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
    "x-vercel-ai-ui-message-stream": "v1",
}
"""The headers of the UI message stream (besides its content type)."""

FAILED_STATUSES = (Run.Status.FAILED, Run.Status.INTERRUPTED, Run.Status.BUDGET_EXHAUSTED)
"""Run statuses the stream reports with an ``error`` chunk."""
_FINISH_REASONS = {"length": "length", "content_filter": "content-filter"}

Chunk = dict[str, Any]


def run_message_id(run_id: UUID | str) -> str:
    """The id of the assistant UI message that shows everything run ``run_id`` answered."""
    return f"run-{run_id}"


def encode(chunks: list[Chunk]) -> bytes:
    """Chunks as Server-Sent Events: one ``data:`` line each (JSON has no raw newline)."""
    return b"".join(
        f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()
        for chunk in chunks
    )


DONE = b"data: [DONE]\n\n"
"""The last line of a UI message stream."""


def finish_reason(status: str, last_finish_reason: str = "") -> str:
    """The ``finish`` chunk's reason for a run that ended with ``status``."""
    if status == Run.Status.COMPLETED:
        return _FINISH_REASONS.get(last_finish_reason, "stop")
    if status == Run.Status.AWAITING_APPROVAL:
        return "tool-calls"
    if status in FAILED_STATUSES:
        return "error"
    return "other"  # max_iterations, cancelled


def thinking_texts(message: Message) -> list[str]:
    """The reasoning texts stored with an assistant message (Anthropic's thinking blocks)."""
    ours = message.provider_metadata.get("anthropic") if message.provider_metadata else None
    blocks = ours.get("thinking_blocks") if isinstance(ours, dict) else None
    if not isinstance(blocks, list):
        return []
    return [
        block["thinking"]
        for block in blocks
        if isinstance(block, dict) and isinstance(block.get("thinking"), str) and block["thinking"]
    ]


def _code_of(classes: tuple[type[ConversationsError], ...], code: str) -> bool:
    pending: list[type[ConversationsError]] = list(classes)
    while pending:
        cls = pending.pop()
        if cls.code == code:
            return True
        pending.extend(cls.__subclasses__())
    return False


def error_text(status: str, code: str, message: str) -> str:
    """What the ``error`` chunk says about a run that ended badly.

    The stored message is shown only for a provider's or a budget's error
    (the messages endpoint answers those with it too); anything else (an
    unexpected exception, the server's configuration) gets a fixed sentence.
    """
    if message and _code_of((ProviderError, BudgetExceeded), code):
        return f"{message} ({code})"
    return f"The run ended {status} ({code or 'internal_error'})."


def source_urls(message: Message) -> list[Chunk]:
    """The sources an assistant turn cites, once each, as ``source-url`` chunks (in the history,
    the same objects are its ``source-url`` parts); numbered like the chat page numbers them.
    A source whose address is not http(s) is left out."""
    seen: dict[str, Chunk] = {}
    for citation in message.citations.all():
        # Only web addresses: a client renders these as links.
        web = citation.url.lower().startswith(("https://", "http://"))
        if web and citation.url not in seen:
            chunk: Chunk = {
                "type": "source-url",
                "sourceId": f"source-{message.pk}-{len(seen) + 1}",
                "url": citation.url,
            }
            if citation.title:
                chunk["title"] = citation.title
            seen[citation.url] = chunk
    return list(seen.values())
