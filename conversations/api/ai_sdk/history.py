"""The AI SDK history a page at a time: whole turns, the newest page first.

The body of each page stays what ``useChat({messages})`` takes (a JSON array
of ``UIMessage`` values, oldest first), so the links to the other pages are
in the ``Link`` header (RFC 8288): ``rel="next"`` is the page of older turns,
``rel="prev"`` the page of newer ones. A page is cut at the user and system
messages that start turns (:class:`~conversations.api.pagination.TurnPagination`),
never inside a run, so every tool result is on the page of its call.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from conversations import selectors
from conversations.models import Conversation, Message

from ..pagination import TurnPagination

__all__ = ["HISTORY_PAGE_LINK", "HistoryQuerySerializer", "history_page"]

_STARTS = (Message.Role.USER, Message.Role.SYSTEM)

HISTORY_PAGE_LINK = OpenApiParameter(
    "Link",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200],
    description='The other pages: `<url>; rel="next"` (older turns), `<url>; rel="prev"` '
    "(newer turns); absent when the whole history is on this page.",
)
"""The ``Link`` header of the history's pages, for the schema."""


class HistoryQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the history (for the schema: the paginator reads them)."""

    cursor = serializers.CharField(required=False, help_text="From a `Link` header's URL.")
    page_size = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=TurnPagination.max_page_size,
        help_text=f"Turns per page (default {TurnPagination.page_size}): a user or system "
        "message with the answer that follows it.",
    )


def _link(paginator: TurnPagination) -> str:
    links = []
    # The cursor pagination's "next" follows its ordering, newest turns first: older ones.
    if (older := paginator.get_next_link()) is not None:
        links.append(f'<{older}>; rel="next"')
    if (newer := paginator.get_previous_link()) is not None:
        links.append(f'<{newer}>; rel="prev"')
    return ", ".join(links)


def history_page(
    *, request: Request, view: APIView, conversation: Conversation
) -> tuple[list[Message], dict[str, str]]:
    """The stored messages of one page of turns (oldest first) and the ``Link`` header, if any.

    Three queries besides the page's own: the turn starts of the page, the
    start of the next newer turn (where this page ends) and the messages.
    """
    messages = selectors.conversation_messages(conversation=conversation)
    starts = messages.filter(role__in=_STARTS).select_related(None).prefetch_related(None)
    starts = starts.only("pk", "position")
    paginator = TurnPagination()
    page: list[Message] = list(paginator.paginate_queryset(starts, request, view=view) or ())
    window: dict[str, Any] = {}
    if page:
        first, last = page[-1].position, page[0].position
        if paginator.has_next:  # older turns are on the next page
            window["position__gte"] = first
        end = (
            starts.filter(position__gt=last)
            .order_by("position")
            .values_list("position", flat=True)
            .first()
        )
        if end is not None:
            window["position__lt"] = end
    elif "cursor" in request.query_params:
        # A cursor past the oldest turn: nothing is left to show.
        return [], {}
    rows = list(messages.filter(**window).select_related("run").order_by("position"))
    link = _link(paginator)
    return rows, ({"Link": link} if link else {})
