"""Storing an upload as an attachment: hashed and sniffed while read, written once, deduplicated.

The file is read in chunks (Django keeps an upload over
``FILE_UPLOAD_MAX_MEMORY_SIZE`` in a temporary file), hashed, measured and
probed for text on the way, then handed to the storage in chunks again: it
never sits in memory whole. The same bytes of the same type from the same
owner are one row and one stored object: the second upload returns the first
row and stores nothing. A refused file (too large, a type not allowed) leaves
nothing behind.
"""

from __future__ import annotations

import hashlib
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any

from django.core.files.base import ContentFile, File
from django.db import IntegrityError, transaction

from conversations.conf import app_settings
from conversations.exceptions import AttachmentTooLarge, UnsupportedMediaType
from conversations.models import ATTACHMENT_NAME_MAX_LENGTH, Attachment, attachment_storage

from .sniffing import HEAD_BYTES, NEVER_ALLOWED, TextProbe, sanitise_name, sniff_media_type

__all__ = ["StoredAttachment", "allowed_media_types", "check_size", "store_attachment"]

_SPOOL_IN_MEMORY = 2_621_440  # Django's FILE_UPLOAD_MAX_MEMORY_SIZE default

STORAGE_PREFIX = "conversations/attachments/"
"""Where in the storage attachments' objects are named (``<prefix><row id>``)."""


@dataclass(frozen=True, slots=True)
class StoredAttachment:
    """What :func:`store_attachment` did: the row, and whether this call created it."""

    attachment: Attachment
    created: bool


def allowed_media_types() -> frozenset[str]:
    """``ATTACHMENT_TYPES`` less the types never allowed."""
    return frozenset(app_settings().ATTACHMENT_TYPES) - NEVER_ALLOWED


def check_size(size: int, *, field: str = "file") -> None:
    """Raise :class:`AttachmentTooLarge` when ``size`` is over ``MAX_ATTACHMENT_BYTES``."""
    limit = app_settings().MAX_ATTACHMENT_BYTES
    if size > limit:
        raise AttachmentTooLarge(
            f"the file is {size} bytes; at most {limit} bytes are accepted",
            code="attachment_too_large",
            field=field,
        )


def _as_file(content: Any, name: str, field: str) -> File[Any]:
    if isinstance(content, bytes | bytearray | memoryview):
        return ContentFile(bytes(content), name=name or "file")
    if isinstance(content, File):
        return content
    if callable(getattr(content, "seekable", None)) and not content.seekable():
        return _spooled(content, name, field)
    return File(content, name=name or None)


def _spooled(stream: Any, name: str, field: str) -> File[Any]:
    """A stream that cannot be read twice, copied to a spooled temporary file (size checked)."""
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY)  # noqa: SIM115  (File owns it)
    size = 0
    while chunk := stream.read(File.DEFAULT_CHUNK_SIZE):
        size += len(chunk)
        if size > app_settings().MAX_ATTACHMENT_BYTES:
            spool.close()
            check_size(size, field=field)
        spool.write(chunk)
    spool.seek(0)
    return File(spool, name=name or None)


def store_attachment(
    *, owner: Any, file: Any, name: str | None = None, field: str = "file"
) -> StoredAttachment:
    """Store ``file`` (an ``UploadedFile``, a Django ``File``, a binary file or bytes) for ``owner``.

    A binary stream that cannot seek is first copied to a spooled temporary
    file (in memory up to 2.5 MB, like Django's uploads).

    ``name`` defaults to the file's own name; it is sanitised and only ever
    chooses among text types. Raises :class:`AttachmentTooLarge` (over
    ``MAX_ATTACHMENT_BYTES``) or :class:`UnsupportedMediaType` (a sniffed
    type ``ATTACHMENT_TYPES`` does not allow), with ``field`` as their field,
    before anything is stored.
    """
    upload = _as_file(file, name or "", field)
    given = name if name is not None else (upload.name or "")
    clean_name = sanitise_name(given, limit=ATTACHMENT_NAME_MAX_LENGTH)
    if upload.size is not None:
        check_size(upload.size, field=field)
    digest, head, probe, size = hashlib.sha256(), b"", TextProbe(), 0
    for chunk in upload.chunks():
        size += len(chunk)
        check_size(size, field=field)  # a file that grows past its announced size
        digest.update(chunk)
        probe.feed(chunk)
        if len(head) < HEAD_BYTES:
            head += chunk[: HEAD_BYTES - len(head)]
    probe.feed(b"", final=True)
    media_type = sniff_media_type(head, is_text=probe.is_text, name=clean_name)
    if media_type not in allowed_media_types():
        raise UnsupportedMediaType(
            f"files of type {media_type} are not accepted",
            code="unsupported_media_type",
            field=field,
        )
    sha256 = digest.hexdigest()
    existing = Attachment.objects.filter(owner=owner, sha256=sha256, media_type=media_type)
    found = existing.first()
    if found is not None:
        return StoredAttachment(found, created=False)
    row = Attachment(
        id=uuid.uuid4(),
        owner=owner,
        sha256=sha256,
        media_type=media_type,
        size=size,
        name=clean_name,
    )
    upload.seek(0)
    stored = attachment_storage().save(f"{STORAGE_PREFIX}{row.id.hex}", upload)
    row.file.name = stored
    try:
        with transaction.atomic():
            row.save(force_insert=True)
    except IntegrityError:
        # The same bytes were stored meanwhile by a concurrent upload: keep that one.
        attachment_storage().delete(stored)
        found = existing.first()
        if found is None:
            raise
        return StoredAttachment(found, created=False)
    return StoredAttachment(row, created=True)
