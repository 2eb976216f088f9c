"""Deleting attachments nothing references, and their stored objects once the delete commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete
from django.utils import timezone

from conversations.models import Attachment, attachment_storage
from conversations.selectors import unreferenced_attachments

__all__ = [
    "connect_signals",
    "delete_stored_file",
    "delete_unreferenced_attachments",
    "purge_attachments",
]


def delete_unreferenced_attachments(
    *, owner: Any = None, ids: Sequence[Any] | None = None, older_than: timedelta | None = None
) -> int:
    """Delete the attachments (of ``owner``, among ``ids``) no message references; their count.

    ``older_than`` spares those uploaded more recently (an upload is
    unreferenced until the message naming it is posted). Each stored object
    is deleted once the deletion commits (:func:`delete_stored_file`); an
    attachment referenced again meanwhile is kept by the database (its links
    restrict the delete).
    """
    before = timezone.now() - older_than if older_than is not None else None
    rows = unreferenced_attachments(owner=owner, ids=ids, created_before=before)
    deleted = 0
    for pk in list(rows.values_list("pk", flat=True)):
        # One at a time: a row linked since the list was read is skipped, not an error.
        with transaction.atomic():
            gone = unreferenced_attachments(ids=[pk]).delete()[1].get(Attachment._meta.label, 0)
        deleted += gone
    return deleted


def purge_attachments(*, older_than: timedelta) -> int:
    """Every owner's unreferenced attachments uploaded more than ``older_than`` ago (the command)."""
    return delete_unreferenced_attachments(older_than=older_than)


def delete_stored_file(sender: Any, instance: Attachment, **kwargs: Any) -> None:
    """``post_delete`` of an attachment: delete its stored object when the transaction commits.

    Connected by the app's ``ready()``, so a deleted owner (whose attachments
    go with them) leaves no object behind either. Each row has an object of
    its own, so no other row's bytes are touched.
    """
    name = instance.file.name
    if name:
        transaction.on_commit(lambda: attachment_storage().delete(name))


def connect_signals() -> None:
    """Connect :func:`delete_stored_file` (idempotent)."""
    post_delete.connect(
        delete_stored_file, sender=Attachment, dispatch_uid="conversations_attachment_file"
    )
