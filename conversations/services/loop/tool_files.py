"""The files a tool returned, stored as attachments of the conversation's owner and referenced.

A :class:`~conversations.tools.ToolResult`'s files are stored here, in the
thread that ran the tool (the bytes are written before the loop takes its
locks): each new file once per owner and content, like an upload, and each
``Attachment`` row returned checked to be the owner's. What comes back are
references (:class:`~conversations.domain.FilePart` with an attachment id and
no bytes); the loop writes their links with the tool message, in one
transaction. A file stored for a call whose message is never written (the
call timed out, the run was fenced out) is an orphan that
``purge_attachments`` removes after its grace period.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model

from conversations.conf import app_settings
from conversations.domain import FilePart
from conversations.exceptions import InvalidArgumentError
from conversations.models import Conversation
from conversations.selectors import attachment_part
from conversations.tools.results import is_attachment_row

from ..attachments import store_attachment

__all__ = ["ToolFilesRefused", "store_tool_files"]


class ToolFilesRefused(Exception):
    """A tool returned files that cannot be stored; the message says why, in our words.

    The text is written here (never a tool's or a storage's own words), so
    the model may read it.
    """


def store_tool_files(*, conversation_id: Any, files: Sequence[Any]) -> tuple[FilePart, ...]:
    """Store ``files`` for the owner of the conversation; their references, in order.

    Raises :class:`ToolFilesRefused` for too many files, a file too large or
    of a type not allowed, or an ``Attachment`` of another owner; a storage
    that fails raises its own exception (the loop answers that with its fixed
    failure sentence).
    """
    if not files:
        return ()
    limit = app_settings().MAX_ATTACHMENTS_PER_MESSAGE
    if len(files) > limit:
        raise ToolFilesRefused(f"it returned {len(files)} files; at most {limit} are accepted")
    owner_id = Conversation.objects.values_list("owner_id", flat=True).get(pk=conversation_id)
    owner = None
    parts: list[FilePart] = []
    for index, item in enumerate(files):
        if is_attachment_row(item):
            if item.owner_id != owner_id:
                raise ToolFilesRefused(
                    f"file {index} is an attachment the conversation's owner does not own"
                )
            parts.append(attachment_part(item))
            continue
        if owner is None:
            owner = get_user_model().objects.get(pk=owner_id)
        try:
            stored = store_attachment(
                owner=owner, file=item.data, name=item.name, field=f"files/{index}"
            )
        except InvalidArgumentError as exc:  # too large, or a type not allowed: our own text
            raise ToolFilesRefused(f"file {index} was refused: {exc.detail}") from None
        parts.append(attachment_part(stored.attachment))
    return tuple(parts)
