"""``file`` parts of ``useChat``: data URLs in, attachments stored; references out, our URL.

The AI SDK sends a file the user picked as a ``file`` part whose ``url`` is a
``data:`` URL (``convertFileListToFileUIParts``). Only those are read: any
other URL is refused with a 400 naming the part, and nothing is ever fetched
by the server (no request to a place a client chose). Each file is stored as
an attachment of the conversation's owner, exactly like an upload (sniffed,
deduplicated, 413 / 415 naming the part), before the run starts. The history
gives the files back as ``file`` parts whose ``url`` is the attachment's
content URL (``GET``, the owner only), never the bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conversations.conf import app_settings
from conversations.domain.parts import parse_data_url
from conversations.exceptions import InvalidArgumentError
from conversations.models import Attachment, Message
from conversations.services import store_attachment

from ..attachment_serializers import content_url
from ..errors import APIError, error_item, json_pointer

__all__ = ["SentFile", "file_parts", "history_file_parts", "read_file_part", "store_sent_files"]


@dataclass(frozen=True, slots=True)
class SentFile:
    """A file part of the new message, decoded, and where it was in the body."""

    path: tuple[str | int, ...]
    """``("messages", i, "parts", j)``: how errors name it."""
    data: bytes
    filename: str


def _invalid(path: Sequence[str | int], detail: str, code: str) -> APIError:
    return APIError(
        detail, code=code, errors=[error_item(code, detail, pointer=json_pointer(path))]
    )


def read_file_part(part: Mapping[str, Any], path: Sequence[str | int]) -> SentFile:
    """The decoded bytes of one ``file`` part; a 400 (413 when too large) names the part."""
    url = part.get("url")
    if not isinstance(url, str):
        raise _invalid([*path, "url"], "Must be a string: a data: URL.", "invalid")
    if not url.startswith("data:"):
        # Never fetched: the server makes no request to a URL a client chose.
        scheme = url.partition(":")[0][:20] if ":" in url else ""
        named = f' ("{scheme}:")' if scheme.isalnum() else ""
        raise _invalid(
            [*path, "url"],
            f"Only data: URLs are accepted for files{named}; upload the file inline, "
            "the server fetches nothing.",
            "unsupported_file_url",
        )
    filename = part.get("filename")
    if filename is not None and not isinstance(filename, str):
        raise _invalid([*path, "filename"], "Must be a string.", "invalid")
    # Base64 is 4 characters for 3 bytes: a URL this long cannot be within the limit.
    limit = app_settings().MAX_ATTACHMENT_BYTES
    if (len(url) - url.find(",") - 1) * 3 // 4 > limit + 2:
        detail = f"The file is larger than {limit} bytes, the most accepted."
        raise APIError(
            detail,
            code="attachment_too_large",
            status_code=413,
            errors=[error_item("attachment_too_large", detail, pointer=json_pointer(path))],
        )
    try:
        _, data = parse_data_url(url, field="url")
    except InvalidArgumentError as exc:
        raise _invalid([*path, "url"], exc.detail, exc.code) from None
    if not data:
        raise _invalid([*path, "url"], "The file is empty.", "invalid")
    return SentFile(path=tuple(path), data=data, filename=filename or "")


def file_parts(parts: Sequence[Any], *, last: int) -> list[SentFile]:
    """The new message's ``file`` parts, decoded; at most ``MAX_ATTACHMENTS_PER_MESSAGE``."""
    found = [
        read_file_part(part, ("messages", last, "parts", index))
        for index, part in enumerate(parts)
        if isinstance(part, Mapping) and part.get("type") == "file"
    ]
    limit = app_settings().MAX_ATTACHMENTS_PER_MESSAGE
    if len(found) > limit:
        raise _invalid(
            ["messages", last, "parts"],
            f"At most {limit} files per message; got {len(found)}.",
            "too_many_attachments",
        )
    return found


def store_sent_files(*, owner: Any, files: Sequence[SentFile]) -> list[Attachment]:
    """Store each file for ``owner`` (the same bytes again: the same row); the rows, in order.

    413 ``attachment_too_large`` / 415 ``unsupported_media_type`` name the part.
    """
    stored = []
    for sent in files:
        field = "/".join(str(step) for step in sent.path)
        stored.append(
            store_attachment(owner=owner, file=sent.data, name=sent.filename, field=field)
        )
    return [item.attachment for item in stored]


def history_file_parts(message: Message) -> list[dict[str, Any]]:
    """A stored message's attachments as ``file`` parts: our content URL, never the bytes."""
    return [
        {
            "type": "file",
            "mediaType": link.attachment.media_type,
            "filename": link.attachment.name,
            "url": content_url(link.attachment_id),
        }
        for link in message.attachment_links.all()
    ]
