"""Files of an imported history: references to the importer's own attachments, checked.

The export lists a message's files as references (``attachments``: id,
sha256, name, media type, size), never their bytes. An import reads them
back the same way: each reference must name an attachment the importer owns
(by ``id``), holding the same bytes (its ``sha256`` must match), on a user
or tool message. Anything else is an :class:`InvalidArgumentError` whose
field points at the reference (``messages/3/attachments/0/id``); nothing is
stored then. Bytes inline (a ``data:`` URL in a content array) are refused
too: store them with ``POST /attachments/`` first.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from conversations.conf import app_settings
from conversations.domain import ChatMessage, FilePart, Role
from conversations.exceptions import InvalidArgumentError
from conversations.models import Attachment
from conversations.selectors import attachment_part

__all__ = ["with_imported_files"]

_ROLES_WITH_FILES = (Role.USER, Role.TOOL)


def _references(raw: Sequence[Any]) -> dict[int, list[tuple[uuid.UUID, str]]]:
    """Each message's ``(id, sha256)`` references, by message index; shapes checked."""
    found: dict[int, list[tuple[uuid.UUID, str]]] = {}
    limit = app_settings().MAX_ATTACHMENTS_PER_MESSAGE
    for index, message in enumerate(raw):
        if not isinstance(message, Mapping) or message.get("attachments") is None:
            continue
        items = message["attachments"]
        where = f"{index}/attachments"
        if not isinstance(items, list):
            raise InvalidArgumentError(
                "attachments must be a list of references ({id, sha256})",
                code="invalid_attachments",
                field=where,
            )
        if len(items) > limit:
            raise InvalidArgumentError(
                f"at most {limit} attachments per message; got {len(items)}",
                code="too_many_attachments",
                field=where,
            )
        refs = []
        for position, item in enumerate(items):
            at = f"{where}/{position}"
            if not isinstance(item, Mapping):
                raise InvalidArgumentError(
                    "an attachment reference must be an object with id and sha256",
                    code="invalid_attachment",
                    field=at,
                )
            try:
                ident = uuid.UUID(str(item.get("id")))
            except ValueError:
                raise InvalidArgumentError(
                    "must be the id of one of your attachments",
                    code="unknown_attachment",
                    field=f"{at}/id",
                ) from None
            sha256 = item.get("sha256")
            if not isinstance(sha256, str):
                raise InvalidArgumentError(
                    "must be the sha256 of the attachment's bytes (hex)",
                    code="invalid_attachment",
                    field=f"{at}/sha256",
                )
            refs.append((ident, sha256))
        if refs:
            found[index] = refs
    return found


def with_imported_files(
    *, owner: Any, raw: Sequence[Any], items: Sequence[ChatMessage]
) -> list[ChatMessage]:
    """``items`` (parsed from ``raw``) with the files ``raw``'s ``attachments`` reference.

    One query reads every attachment referenced. Fields are relative to the
    messages list (the caller prefixes ``messages``).
    """
    references = _references(raw)
    if not references:
        return list(items)
    wanted = {ident for refs in references.values() for ident, _ in refs}
    rows = {row.pk: row for row in Attachment.objects.filter(owner=owner, pk__in=wanted)}
    result = list(items)
    for index, refs in references.items():
        message = result[index]
        if message.role not in _ROLES_WITH_FILES:
            raise InvalidArgumentError(
                f'attachments are only allowed on user and tool messages, got "{message.role}"',
                code="attachments_not_allowed",
                field=f"{index}/attachments",
            )
        parts: list[FilePart] = []
        seen: set[uuid.UUID] = set()
        for position, (ident, sha256) in enumerate(refs):
            row = rows.get(ident)
            at = f"{index}/attachments/{position}"
            if ident in seen:
                raise InvalidArgumentError(
                    "this attachment is already referenced by the message",
                    code="duplicate_attachment",
                    field=f"{at}/id",
                )
            seen.add(ident)
            if row is None:
                # Unknown or another user's: the same answer, so ids cannot be probed.
                raise InvalidArgumentError(
                    "must be the id of one of your attachments",
                    code="unknown_attachment",
                    field=f"{at}/id",
                )
            if row.sha256 != sha256.lower():
                raise InvalidArgumentError(
                    "does not match the sha256 of the attachment's bytes",
                    code="attachment_mismatch",
                    field=f"{at}/sha256",
                )
            parts.append(attachment_part(row))
        result[index] = dataclasses.replace(message, parts=(*message.parts, *parts))
    return result
