"""The files of a message as the admin shows them: thumbnails and chips linking to the bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from conversations.domain.parts import IMAGE_TYPES
from conversations.models import Message

__all__ = ["FileView", "content_url", "file_views", "human_size"]


def human_size(size: int) -> str:
    """``size`` bytes as people read it (``812 B``, ``4.2 KB``, ``20.0 MB``)."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} KB"
    return f"{size / 1_000_000:.1f} MB"


def content_url(attachment_id: Any, *, site: str = "admin") -> str:
    """Where the admin serves an attachment's bytes to staff."""
    return reverse(f"{site}:conversations_attachment_content", args=[attachment_id])


@dataclass(frozen=True, slots=True)
class FileView:
    """One file of a message: a thumbnail for an image, a chip for anything else."""

    name: str
    media_type: str
    size: str
    url: str
    """The admin's URL of the bytes (full size for an image, a download otherwise)."""
    is_image: bool


def file_views(message: Message | None, *, site: str) -> list[FileView]:
    """``message``'s files in order (its links prefetched with their attachments)."""
    if message is None:
        return []
    return [
        FileView(
            name=link.attachment.name or str(link.attachment_id),
            media_type=link.attachment.media_type,
            size=human_size(link.attachment.size),
            url=content_url(link.attachment_id, site=site),
            is_image=link.attachment.media_type in IMAGE_TYPES,
        )
        for link in message.attachment_links.all()
    ]
