"""Attachments: files stored once per owner by content, and the messages that reference them.

An :class:`Attachment` is one owner's file, identified by the sha256 of its
bytes and its media type (sniffed from the bytes): the same bytes uploaded
twice are one row and one stored object. The bytes live on the Django storage
named by ``CONVERSATIONS["ATTACHMENT_STORAGE"]`` (a key of ``STORAGES``),
under a name made from the row's id, so deleting one row's file never touches
another's. A message references attachments through :class:`MessageAttachment`
rows, in order; a database rule (``rules``) refuses a link from a message to
an attachment of another owner than the conversation's, and keeps links and
owners from changing afterwards.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from django.conf import settings
from django.core.files.storage import Storage, storages
from django.core.signals import setting_changed
from django.db import models
from django.db.models import Q
from django.dispatch import receiver
from django.utils.functional import LazyObject, empty

from conversations.conf import app_settings

from .transcript import Message

__all__ = [
    "ATTACHMENT_NAME_MAX_LENGTH",
    "MEDIA_TYPE_MAX_LENGTH",
    "Attachment",
    "MessageAttachment",
    "attachment_storage",
]

ATTACHMENT_NAME_MAX_LENGTH: Final = 255
"""The longest original file name kept (a longer one is cut, keeping its extension)."""
MEDIA_TYPE_MAX_LENGTH: Final = 100


class _AttachmentStorage(LazyObject):  # type: ignore[type-arg]  # generic only in the stubs
    """The storage ``ATTACHMENT_STORAGE`` names, looked up again when the settings change."""

    def _setup(self) -> None:
        self._wrapped = storages[app_settings().ATTACHMENT_STORAGE]


_storage = _AttachmentStorage()


def attachment_storage() -> Storage:
    """The storage attachments' bytes are on (``STORAGES[CONVERSATIONS["ATTACHMENT_STORAGE"]]``)."""
    return _storage  # type: ignore[return-value]  # a LazyObject standing for a Storage


@receiver(setting_changed)
def _reset_storage(*, setting: str, **kwargs: Any) -> None:
    if setting in ("CONVERSATIONS", "STORAGES", "MEDIA_ROOT"):
        _storage._wrapped = empty  # type: ignore[assignment]  # looked up again on next use


class Attachment(models.Model):
    """One owner's file: stored once, referenced by any number of that owner's messages."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="llm_attachments"
    )
    sha256 = models.CharField(max_length=64, help_text="sha256 of the bytes (hex).")
    media_type = models.CharField(
        max_length=MEDIA_TYPE_MAX_LENGTH, help_text="Sniffed from the bytes, not the client's."
    )
    size = models.PositiveBigIntegerField(help_text="In bytes.")
    name = models.CharField(
        max_length=ATTACHMENT_NAME_MAX_LENGTH,
        blank=True,
        help_text="The sanitised original file name.",
    )
    file = models.FileField(storage=attachment_storage, max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="conversations_attach_owner_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "sha256", "media_type"],
                name="conversations_attachment_content_unique",
            ),
            models.CheckConstraint(
                condition=Q(sha256__regex=r"^[0-9a-f]{64}$"),
                name="conversations_attachment_sha256_hex",
            ),
            models.CheckConstraint(
                condition=Q(media_type__contains="/"),
                name="conversations_attachment_media_type_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name or self.pk} ({self.media_type}, {self.size} bytes)"


class MessageAttachment(models.Model):
    """A message's reference to an attachment, at a position among the message's files."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="attachment_links")
    # RESTRICT: an attachment goes only once nothing references it, or with its messages.
    attachment = models.ForeignKey(Attachment, on_delete=models.RESTRICT, related_name="links")
    position = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["message", "position"]
        verbose_name = "message attachment"
        constraints = [
            models.UniqueConstraint(
                fields=["message", "position"],
                name="conversations_messageattachment_position_unique",
            ),
            models.UniqueConstraint(
                fields=["message", "attachment"],
                name="conversations_messageattachment_once",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.message_id}#{self.position} -> {self.attachment_id}"
