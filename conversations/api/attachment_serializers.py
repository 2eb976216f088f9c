"""Bodies of attachments: the upload's answer, and the references messages carry.

A message never carries an attachment's bytes: it lists references (id,
name, media type, size and the URL of the bytes), read from the links
prefetched with the message (``selectors.with_tool_calls``), so serialising
a page of messages queries nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.models import Attachment, Message

__all__ = [
    "AttachmentReferenceSerializer",
    "AttachmentSerializer",
    "attachment_references",
    "content_url",
]


def content_url(attachment_id: Any) -> str:
    """The URL of an attachment's bytes, from the site's root (the same in every answer)."""
    return reverse("conversations:attachment-content", args=[attachment_id])


class AttachmentReferenceSerializer(serializers.Serializer[Any]):
    """An attachment as a message references it (never its bytes)."""

    id = serializers.UUIDField()
    name = serializers.CharField(help_text="The sanitised original file name.")
    media_type = serializers.CharField(help_text="Sniffed from the bytes when uploaded.")
    size = serializers.IntegerField(help_text="In bytes.")
    url = serializers.SerializerMethodField(help_text="Where the bytes are (`GET`, the owner).")

    def get_url(self, obj: Attachment) -> str:
        return content_url(obj.pk)


class AttachmentSerializer(AttachmentReferenceSerializer):
    """An uploaded attachment."""

    sha256 = serializers.CharField(help_text="sha256 of the bytes (hex).")
    created_at = serializers.DateTimeField()


class AttachmentInputSerializer(serializers.Serializer[Any]):
    """The upload: one file in the multipart field `file`."""

    file = serializers.FileField(
        help_text="The file. Its type is sniffed from its bytes (PNG, JPEG, GIF, WebP, PDF, "
        "plain text, Markdown, CSV and JSON by default); 415 `unsupported_media_type` "
        "otherwise, 413 `attachment_too_large` over `MAX_ATTACHMENT_BYTES`."
    )


@extend_schema_field(AttachmentReferenceSerializer(many=True))
class AttachmentReferencesField(serializers.Field):  # type: ignore[type-arg]
    """A message's attachments, in order, from its prefetched links."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("source", "*")
        kwargs.setdefault("read_only", True)
        kwargs.setdefault("help_text", "The files of a user or tool message, in order.")
        super().__init__(**kwargs)

    def to_representation(self, value: Message) -> list[dict[str, Any]]:
        return attachment_references(value, self.context)


def attachment_references(message: Message, context: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The references of ``message``'s attachments (its links, prefetched or read)."""
    links = message.attachment_links.all()
    return [
        dict(AttachmentReferenceSerializer(link.attachment, context=context).data) for link in links
    ]
