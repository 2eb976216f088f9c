"""A tool's answer with files: :class:`ToolResult`, its text and the images or documents it returns.

A tool returns text (or any JSON value) for the model to read. It may also
hand back files, an image it drew or a PDF it fetched, by returning a
:class:`ToolResult`. The loop stores each file as an attachment of the
conversation's owner and the tool message references it, in the same
transaction as the message; the bytes never enter the message row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from conversations.domain import FilePart
from conversations.exceptions import InvalidArgumentError

__all__ = ["ToolResult", "is_attachment_row"]


def is_attachment_row(value: object) -> bool:
    """Whether ``value`` is a saved ``Attachment`` row (told apart without importing the model)."""
    meta = getattr(value, "_meta", None)
    return getattr(meta, "label", None) == "conversations.Attachment" and (
        getattr(value, "pk", None) is not None
    )


class ToolResult:
    """What a tool returns when it has files to give back beside its text.

    ``files`` holds :class:`~conversations.domain.FilePart` values with their
    bytes (``FilePart("image/png", data, name="chart.png")``) or saved
    ``Attachment`` rows of the conversation's owner. A new file's type is
    sniffed from its bytes when it is stored (the declared type is only a
    hint) and must be one ``ATTACHMENT_TYPES`` allows, within
    ``MAX_ATTACHMENT_BYTES``; at most ``MAX_ATTACHMENTS_PER_MESSAGE`` files.
    A file the loop cannot store makes the call fail, and the model reads why.
    """

    __slots__ = ("files", "text")

    text: str
    """What the model reads (cut to ``TOOL_RESULT_MAX_BYTES`` like any result)."""
    files: tuple[Any, ...]
    """The files, in order: ``FilePart`` values with bytes, or ``Attachment`` rows."""

    def __init__(self, text: str = "", files: Iterable[Any] = ()) -> None:
        if not isinstance(text, str):
            raise InvalidArgumentError(
                f"a ToolResult's text must be a string, got {type(text).__name__}",
                code="invalid_tool_result",
                field="text",
            )
        if isinstance(files, str | bytes) or not isinstance(files, Iterable):
            raise InvalidArgumentError(
                "a ToolResult's files must be a list of FilePart values or Attachment rows",
                code="invalid_tool_result",
                field="files",
            )
        checked = tuple(files)
        for index, item in enumerate(checked):
            if is_attachment_row(item):
                continue
            if not isinstance(item, FilePart):
                raise InvalidArgumentError(
                    f"files/{index}: a FilePart with bytes or a saved Attachment, "
                    f"got {type(item).__name__}",
                    code="invalid_tool_result",
                    field=f"files/{index}",
                )
            if not item.data:
                raise InvalidArgumentError(
                    f"files/{index}: a FilePart needs its bytes (pass the Attachment row "
                    "to return a stored file)",
                    code="invalid_tool_result",
                    field=f"files/{index}",
                )
        self.text = text
        self.files = checked

    def __repr__(self) -> str:
        return f"ToolResult(text={self.text!r}, files=<{len(self.files)}>)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolResult):
            return NotImplemented
        return self.text == other.text and self.files == other.files

    __hash__ = None  # type: ignore[assignment]  # mutable-looking: compared by value only
