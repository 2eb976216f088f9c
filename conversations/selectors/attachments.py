"""Reads of attachments: a user's own, the ones a message names, and those nothing references."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from conversations.exceptions import InvalidArgumentError
from conversations.models import Attachment, MessageAttachment

__all__ = [
    "owned_attachments",
    "referenced_attachments",
    "resolve_attachments",
    "unreferenced_attachments",
]


def owned_attachments(*, user: Any) -> QuerySet[Attachment]:
    """The attachments ``user`` owns: the only ones a view may show them."""
    if not getattr(user, "is_authenticated", False):
        return Attachment.objects.none()
    return Attachment.objects.filter(owner=user)


def resolve_attachments(
    *, owner: Any, ids: Sequence[Any], field: str = "attachments"
) -> list[Attachment]:
    """The attachments ``ids`` names, in that order, all owned by ``owner`` (one query).

    An id that is not a UUID, that no attachment of ``owner`` has (another
    user's included: it is not told apart from an unknown one) or that appears
    twice raises :class:`InvalidArgumentError` with ``field`` ``<field>/<index>``.
    """
    wanted: list[uuid.UUID] = []
    for index, value in enumerate(ids):
        try:
            wanted.append(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
        except (TypeError, ValueError, AttributeError):
            raise InvalidArgumentError(
                f"{value!r} is not an attachment id",
                code="unknown_attachment",
                field=f"{field}/{index}",
            ) from None
        if wanted[-1] in wanted[:-1]:
            raise InvalidArgumentError(
                "the same attachment is named twice",
                code="duplicate_attachment",
                field=f"{field}/{index}",
            )
    found = {row.pk: row for row in Attachment.objects.filter(owner=owner, pk__in=wanted)}
    for index, pk in enumerate(wanted):
        if pk not in found:
            raise InvalidArgumentError(
                f"no attachment {pk} of yours", code="unknown_attachment", field=f"{field}/{index}"
            )
    return [found[pk] for pk in wanted]


def unreferenced_attachments(
    *,
    owner: Any = None,
    ids: Sequence[Any] | None = None,
    created_before: datetime | None = None,
) -> QuerySet[Attachment]:
    """Attachments no message references: of ``owner``, among ``ids``, created before a time."""
    rows = Attachment.objects.exclude(
        Exists(MessageAttachment.objects.filter(attachment=OuterRef("pk")))
    )
    if owner is not None:
        rows = rows.filter(owner=owner)
    if ids is not None:
        rows = rows.filter(pk__in=list(ids))
    if created_before is not None:
        rows = rows.filter(created_at__lt=created_before)
    return rows


def referenced_attachments(*, conversation: Any) -> list[Any]:
    """The ids of the attachments the messages of ``conversation`` reference (one query)."""
    return list(
        MessageAttachment.objects.filter(message__conversation=conversation)
        .values_list("attachment_id", flat=True)
        .distinct()
    )
