"""Reading attachments' bytes back from their storage, for a response or a provider call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.core.files.base import File

from conversations import domain
from conversations.models import Attachment, attachment_storage

__all__ = ["load_parts", "open_attachment", "read_attachment"]


def open_attachment(attachment: Attachment) -> File[Any]:
    """The stored object of ``attachment``, open for reading in binary (close it)."""
    return attachment_storage().open(str(attachment.file.name), "rb")


def read_attachment(attachment: Attachment) -> bytes:
    """All of the bytes of ``attachment`` (bounded by ``MAX_ATTACHMENT_BYTES`` at upload)."""
    with open_attachment(attachment) as handle:
        return bytes(handle.read())


def load_parts(messages: Sequence[domain.ChatMessage]) -> list[domain.ChatMessage]:
    """``messages`` with the bytes of every part that only references an attachment.

    One query for all of their rows, then one read of each stored object
    (each distinct attachment once); messages without such parts are
    returned as they are.
    """
    wanted = {
        part.attachment_id
        for message in messages
        for part in message.parts
        if not part.loaded and part.attachment_id is not None
    }
    if not wanted:
        return list(messages)
    rows = {str(row.pk): row for row in Attachment.objects.filter(pk__in=list(wanted))}
    cache: dict[str, bytes] = {}
    loaded: list[domain.ChatMessage] = []
    for message in messages:
        if not any(not part.loaded for part in message.parts):
            loaded.append(message)
            continue
        parts = []
        for part in message.parts:
            if part.loaded or part.attachment_id not in rows:
                parts.append(part)
                continue
            if part.attachment_id not in cache:
                cache[part.attachment_id] = read_attachment(rows[part.attachment_id])
            parts.append(part.with_data(cache[part.attachment_id]))
        loaded.append(replace(message, parts=tuple(parts)))
    return loaded
