"""GET /search/: the user's messages matching a query, best first, cursor-paginated."""

from __future__ import annotations

import base64
import binascii
import json
from collections import OrderedDict
from datetime import datetime, time
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from conversations.models import Message, ToolCallStatus
from conversations.selectors.search import SearchFilters, highlight, query_words, search_page
from conversations.selectors.search_bounds import max_words

from ..base import ConversationsAPIView
from ..pagination import invalid_cursor
from ..responses import AUTH_ERRORS, ERR_400_LIST, error_response
from ..schema import document

__all__ = ["SearchView"]

PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_OFFSET = 2**63 - 1 - (MAX_PAGE_SIZE + 1)
"""The largest offset whose page still ends in the signed 64 bits of SQL's ``LIMIT``/``OFFSET``."""
ERR_503 = error_response(
    "The search ran past its time bound and was stopped (`search_timeout`); "
    "fewer, longer or rarer words, or filters, make it cheaper."
)


class _Moment(serializers.DateTimeField):
    """A date (the start of that day, in the current time zone) or a date-time."""

    def to_internal_value(self, value: Any) -> datetime:
        if isinstance(value, str) and len(value) == 10:
            day = serializers.DateField().to_internal_value(value)
            return timezone.make_aware(datetime.combine(day, time.min))
        return super().to_internal_value(value)


class SearchQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the search."""

    q = serializers.CharField(
        max_length=200,
        help_text="Words to find (all of them, each as a word prefix; at most SEARCH_MAX_WORDS).",
    )
    role = serializers.ChoiceField(choices=Message.Role.choices, required=False)
    tool = serializers.CharField(max_length=200, required=False, help_text="A tool's name.")
    status = serializers.ChoiceField(
        choices=ToolCallStatus.choices, required=False, help_text="A tool call's status."
    )
    model = serializers.CharField(max_length=200, required=False, help_text="A model's name.")
    profile = serializers.SlugField(required=False, help_text="A profile's slug.")
    to = _Moment(required=False, help_text="Created before (date or date-time).")
    cursor = serializers.CharField(required=False, help_text="From a previous page's links.")
    page_size = serializers.IntegerField(min_value=1, max_value=MAX_PAGE_SIZE, required=False)

    def validate_q(self, value: str) -> str:
        words = query_words(value)
        if not words:
            raise serializers.ValidationError("Give at least one word.", code="no_words")
        if len(words) > max_words():
            raise serializers.ValidationError(
                f"Give at most {max_words()} words (this query has {len(words)}).",
                code="too_many_words",
            )
        return value


# ``from`` is a Python keyword, so it cannot be declared in the class body.
SearchQuerySerializer._declared_fields["from"] = _Moment(
    required=False, help_text="Created at or after (date or date-time)."
)


class _SearchConversationSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    title = serializers.CharField()


class SearchResultSerializer(serializers.Serializer[Any]):
    """One message found."""

    id = serializers.IntegerField(help_text="The message's id.")
    conversation = _SearchConversationSerializer()
    position = serializers.IntegerField()
    role = serializers.CharField()
    created_at = serializers.DateTimeField()
    snippet = serializers.SerializerMethodField(
        help_text="HTML: the text escaped, the matching words in `<mark>`."
    )
    rank = serializers.FloatField(help_text="Higher is a better match.")

    @extend_schema_field(serializers.CharField())
    def get_snippet(self, obj: Any) -> str:
        return highlight(obj.snippet or "")


class SearchPageSerializer(serializers.Serializer[Any]):
    """A page of results."""

    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = SearchResultSerializer(many=True)


def _encode(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _decode(cursor: str) -> int:
    try:
        offset = json.loads(base64.urlsafe_b64decode(cursor.encode()))["o"]
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError):
        offset = None
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET:
        raise invalid_cursor()
    return offset


class SearchView(ConversationsAPIView):
    """Full-text search over the user's messages, tool names, arguments and results."""

    @document(
        operation_id="search",
        summary="Search your messages",
        description=(
            "Finds the messages of your conversations whose content, tool names, tool "
            "argument values or tool results hold every word of `q` (each as a word prefix: "
            "`Leip` finds `Leipzig`), best match first, with a highlighted snippet and a "
            "rank. Only the newest `SEARCH_MAX_CANDIDATES` matches are ranked and paged. "
            "Filters narrow the search; `from`/`to` take a date or a date-time. "
            "Cursor-paginated (`next`/`previous` links). A search that runs past "
            "`SEARCH_TIMEOUT_SECONDS` is stopped: 503 `search_timeout`."
        ),
        parameters=[SearchQuerySerializer],
        responses={
            200: SearchPageSerializer,
            400: ERR_400_LIST,
            503: ERR_503,
            **AUTH_ERRORS,
        },
        tags=["search"],
    )
    def get(self, request: Request) -> Response:
        query = self.query(SearchQuerySerializer)
        filters = SearchFilters(
            role=query.get("role"),
            tool=query.get("tool"),
            status=query.get("status"),
            model=query.get("model"),
            profile=query.get("profile"),
            start=query.get("from"),
            end=query.get("to"),
        )
        size = query.get("page_size", PAGE_SIZE)
        offset = _decode(query["cursor"]) if "cursor" in query else 0
        rows = search_page(
            query=query["q"], user=request.user, filters=filters, offset=offset, limit=size + 1
        )
        url = request.build_absolute_uri()
        after = (
            replace_query_param(url, "cursor", _encode(offset + size)) if len(rows) > size else None
        )
        before = None
        if offset > 0:
            back = max(offset - size, 0)
            before = (
                replace_query_param(url, "cursor", _encode(back))
                if back
                else remove_query_param(url, "cursor")
            )
        results = SearchResultSerializer(rows[:size], many=True).data
        return Response(OrderedDict(next=after, previous=before, results=results))
