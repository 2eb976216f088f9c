"""Cursor pagination for the API's lists, refusing cursors it did not make."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination

from .errors import APIError, error_item

__all__ = [
    "ApprovalPagination",
    "ConversationPagination",
    "MessagePagination",
    "OutputSchemaPagination",
    "RunPagination",
    "TurnPagination",
    "invalid_cursor",
]


def invalid_cursor(parameter: str = "cursor") -> APIError:
    """The 400 of a cursor the API did not make (forged, truncated, out of range)."""
    detail = "Not a cursor of this list; use the next or previous link of a page."
    return APIError(
        detail,
        code="invalid_cursor",
        errors=[error_item("invalid_cursor", detail, parameter=parameter)],
    )


class _CheckedCursorPagination(CursorPagination):
    """DRF's cursor pagination, plus a check of the cursor's position value.

    A cursor is client-controlled base64; DRF passes its position straight
    into the ordering filter, so a forged one could make the database (or a
    naive-datetime warning) fail. Positions that the ordering field does not
    accept are refused like any other bad cursor, and a bad cursor is a 400
    ``invalid_cursor`` (DRF answers 404, which would read as "no such list").
    """

    page_size_query_param = "page_size"
    max_page_size = 100

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> Any:
        self._model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request: Any) -> Cursor | None:
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise self._invalid() from None
        if cursor is None or cursor.position is None:
            return cursor
        name = self.ordering[0].lstrip("-")
        field = self._model._meta.get_field(name)
        try:
            value = field.to_python(cursor.position)
        except (DjangoValidationError, TypeError, ValueError, OverflowError):
            raise self._invalid() from None
        if value is None or (isinstance(value, datetime) and value.tzinfo is None):
            raise self._invalid()
        return cursor

    def _invalid(self) -> APIError:
        return invalid_cursor(self.cursor_query_param)


class ConversationPagination(_CheckedCursorPagination):
    """Most recently updated first."""

    page_size = 20
    ordering = ("-updated_at", "-id")


class MessagePagination(_CheckedCursorPagination):
    """Oldest first, by position (unique within a conversation)."""

    page_size = 50
    ordering = ("position",)


class RunPagination(_CheckedCursorPagination):
    """Newest first."""

    page_size = 20
    ordering = ("-started_at", "-id")


class OutputSchemaPagination(_CheckedCursorPagination):
    """The newest schema first."""

    page_size = 50
    ordering = ("-created_at", "-id")


class ApprovalPagination(_CheckedCursorPagination):
    """Oldest request first: the call that has waited longest is decided first."""

    page_size = 50
    ordering = ("requested_at", "id")


class TurnPagination(_CheckedCursorPagination):
    """The user and system messages that start the turns of a history, newest first.

    The chat history's pages are cut at these messages, so that a run's
    assistant turns and tool results are never split between two pages.
    """

    page_size = 20
    ordering = ("-position",)
