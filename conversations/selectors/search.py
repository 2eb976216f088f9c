"""Full-text search over messages: contents, tool names, tool arguments and tool results.

The index is kept by the database (``conversations.services.transcript.search_index``):
a GIN-indexed ``tsvector`` on PostgreSQL, an FTS5 table on SQLite. A query is
its words, all required (``plainto_tsquery`` on PostgreSQL, quoted FTS5
terms on SQLite, so no operator syntax leaks through). Rank is higher for a
better match on both. Snippets mark matches with two private-use characters
that :func:`highlight` turns into ``<mark>`` after escaping the text, so a
message's own markup is never rendered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any, Final

from django.db import connection
from django.db.models import BooleanField, Exists, FloatField, OuterRef, Q, QuerySet, TextField
from django.db.models.expressions import RawSQL

from conversations.conf import app_settings
from conversations.exceptions import ConfigurationError
from conversations.models import Conversation, Message, ToolCall

__all__ = [
    "SearchFilters",
    "highlight",
    "matching_conversations",
    "matching_messages",
    "query_words",
    "search_config",
    "search_messages",
]

START: Final = "\ue000"
STOP: Final = "\ue001"
_WORD = re.compile(r"\w+")
_CONFIG_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

_DOCUMENT_SQL: Final = (
    "conversations_message.content"
    " || ' ' || coalesce((SELECT a.name FROM conversations_toolcall a"
    " WHERE a.id = conversations_message.tool_call_id), '')"
    " || ' ' || coalesce((SELECT {aggregate} FROM conversations_toolcall c"
    " WHERE c.message_id = conversations_message.id), '')"
)


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Narrow a search; every field is optional."""

    role: str | None = None
    """Only messages of this role."""
    tool: str | None = None
    """Only messages that make a call to this tool or answer one."""
    status: str | None = None
    """Only messages with a call (made or answered) in this status."""
    model: str | None = None
    """Only messages written by this model (the message's or its run's)."""
    profile: str | None = None
    """Only conversations of the profile with this slug."""
    start: datetime | None = None
    """Only messages created at or after this moment."""
    end: datetime | None = None
    """Only messages created before this moment."""


def search_config() -> str:
    """The PostgreSQL text search configuration, checked to be a plain name."""
    name = app_settings().SEARCH_CONFIG
    if not isinstance(name, str) or not _CONFIG_NAME.match(name):
        raise ConfigurationError(
            f"CONVERSATIONS['SEARCH_CONFIG'] must be a text search configuration name, "
            f"got {name!r}",
            code="invalid_search_config",
        )
    return name


def query_words(text: str) -> list[str]:
    """The words of a query (letters and digits); punctuation and operators are dropped."""
    return _WORD.findall(text)


def search_messages(
    *, query: str, user: Any | None, filters: SearchFilters | None = None
) -> QuerySet[Message]:
    """Messages matching every word of ``query``, best first, annotated ``rank`` and ``snippet``.

    ``user`` limits the search to their conversations (``None``: everyone's).
    No words in ``query`` match nothing.
    """
    messages = Message.objects.all()
    if user is not None:
        messages = messages.filter(conversation__owner=user)
    messages = _matched(_filtered(messages, filters or SearchFilters()), query)
    if connection.vendor == "postgresql":
        messages = _postgres_rank(messages, " ".join(query_words(query)))
    else:
        messages = _sqlite_rank(messages, _fts_query(query))
    return messages.select_related("conversation")


def matching_messages(*, messages: QuerySet[Message], query: str) -> QuerySet[Message]:
    """``messages`` that the full-text search finds for ``query`` (the admin's search)."""
    return _matched(messages, query)


def matching_conversations(
    *, conversations: QuerySet[Conversation], query: str
) -> QuerySet[Conversation]:
    """``conversations`` holding a message the full-text search finds for ``query``."""
    found = _matched(Message.objects.all(), query).values("conversation_id")
    return conversations.filter(pk__in=found)


def _fts_query(query: str) -> str:
    # Each word quoted: FTS5 then reads no operator (AND, NEAR, *, ...) from the user.
    return " ".join(f'"{word}"' for word in query_words(query))


def _matched(messages: QuerySet[Message], query: str) -> QuerySet[Message]:
    """Only the messages holding every word (no table names: safe inside a subquery)."""
    words = query_words(query)
    if not words:
        return messages.none()
    if connection.vendor == "postgresql":
        return messages.filter(
            RawSQL(
                "search_vector @@ plainto_tsquery(%s::regconfig, %s)",
                (search_config(), " ".join(words)),
                output_field=BooleanField(),
            )
        )
    return messages.filter(
        pk__in=RawSQL(
            "SELECT rowid FROM conversations_message_fts WHERE conversations_message_fts MATCH %s",
            (_fts_query(query),),
        )
    )


def _filtered(messages: QuerySet[Message], filters: SearchFilters) -> QuerySet[Message]:
    if filters.role:
        messages = messages.filter(role=filters.role)
    if filters.tool:
        made = ToolCall.objects.filter(message=OuterRef("pk"), name=filters.tool)
        messages = messages.filter(Exists(made) | Q(tool_call__name=filters.tool))
    if filters.status:
        made = ToolCall.objects.filter(message=OuterRef("pk"), status=filters.status)
        messages = messages.filter(Exists(made) | Q(tool_call__status=filters.status))
    if filters.model:
        messages = messages.filter(Q(model=filters.model) | Q(run__model=filters.model))
    if filters.profile:
        messages = messages.filter(conversation__profile__slug=filters.profile)
    if filters.start:
        messages = messages.filter(created_at__gte=filters.start)
    if filters.end:
        messages = messages.filter(created_at__lt=filters.end)
    return messages


def _postgres_rank(messages: QuerySet[Message], text: str) -> QuerySet[Message]:
    config = search_config()
    tsquery = "plainto_tsquery(%s::regconfig, %s)"
    document = _DOCUMENT_SQL.format(aggregate="string_agg(c.name || ' ' || c.arguments::text, ' ')")
    options = f"StartSel={START}, StopSel={STOP}, MaxWords=30, MinWords=8, MaxFragments=2"
    return messages.annotate(
        rank=RawSQL(  # noqa: S611 - constant SQL, input as parameters
            f"ts_rank(conversations_message.search_vector, {tsquery})",
            (config, text),
            output_field=FloatField(),
        ),
        snippet=RawSQL(  # noqa: S611 - constant SQL, input as parameters
            f"ts_headline(%s::regconfig, {document}, {tsquery}, %s)",
            (config, config, text, options),
            output_field=TextField(),
        ),
    ).order_by("-rank", "-pk")


def _sqlite_rank(messages: QuerySet[Message], match: str) -> QuerySet[Message]:
    hit = (
        "FROM conversations_message_fts WHERE conversations_message_fts MATCH %s"
        " AND conversations_message_fts.rowid = conversations_message.id"
    )
    return messages.annotate(
        rank=RawSQL(  # noqa: S611 - constant SQL, input as parameters
            f"(SELECT -bm25(conversations_message_fts) {hit})", (match,), output_field=FloatField()
        ),
        snippet=RawSQL(  # noqa: S611 - constant SQL, input as parameters
            "(SELECT snippet(conversations_message_fts, 0, char(57344), char(57345), '…', 24)"
            f" {hit})",
            (match,),
            output_field=TextField(),
        ),
    ).order_by("-rank", "-pk")


def highlight(snippet: str) -> str:
    """The snippet as HTML: its text escaped, its matches in ``<mark>``."""
    return escape(snippet, quote=False).replace(START, "<mark>").replace(STOP, "</mark>")
