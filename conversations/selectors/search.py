"""Full-text search over messages: contents, tool names, tool arguments and tool results.

The index is kept by the database (``conversations.services.transcript.search_index``):
a GIN-indexed ``tsvector`` on PostgreSQL, an FTS5 table on SQLite. A query is
its words, all required, each matching as a word prefix ("Leip" finds
"Leipzig"): quoted ``'word':*`` lexemes for ``to_tsquery`` on PostgreSQL,
quoted ``"word"*`` FTS5 terms on SQLite, so no operator syntax leaks through.
Only the newest matches are ranked, and a query has a word cap
(``conversations.selectors.search_bounds``). Rank is higher for a better
match on both. Snippets mark matches with two private-use characters that
:func:`highlight` turns into ``<mark>`` after escaping the text, so a
message's own markup is never rendered; those characters stored in a message
are dropped from its snippet, so they never become marks.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
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

from .search_bounds import max_candidates, max_words, run_bounded

__all__ = [
    "SearchFilters",
    "highlight",
    "matching_conversations",
    "matching_messages",
    "query_words",
    "search_config",
    "search_messages",
    "search_page",
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

    ``user`` limits the search to their chats (``None``: every conversation,
    evaluations included, as the admin sees them); a user's evaluation
    conversations are hidden from them here as in their list.
    No words in ``query`` match nothing; words past ``SEARCH_MAX_WORDS`` are
    ignored. Only the newest ``SEARCH_MAX_CANDIDATES`` matches are ranked, so
    the cost of ranking does not grow with the history.
    """
    messages = Message.objects.all()
    if user is not None:
        messages = messages.filter(
            conversation__owner=user, conversation__kind=Conversation.Kind.CHAT
        )
    found = _matched(_filtered(messages, filters or SearchFilters()), query)
    # The newest matches by id (indexed), then rank only those: ranking and snippets
    # cost per row, and every row of a common word would otherwise be ranked.
    newest = found.order_by("-pk").values("pk")[: max_candidates()]
    candidates = Message.objects.filter(pk__in=newest)
    if connection.vendor == "postgresql":
        candidates = _postgres_rank(candidates, _tsquery(query))
    else:
        candidates = _sqlite_rank(candidates, _fts_query(query))
    return candidates.select_related("conversation")


def search_page(
    *,
    query: str,
    user: Any | None,
    filters: SearchFilters | None = None,
    offset: int = 0,
    limit: int = 20,
) -> list[Message]:
    """The rows ``offset`` to ``offset + limit`` of :func:`search_messages`, fetched in time.

    Raises :class:`~conversations.exceptions.SearchTimeout` when the query ran
    past ``SEARCH_TIMEOUT_SECONDS`` (the database cancelled it).
    """
    found = search_messages(query=query, user=user, filters=filters)
    return run_bounded(lambda: list(found[offset : offset + limit]))


def matching_messages(*, messages: QuerySet[Message], query: str) -> QuerySet[Message]:
    """``messages`` that the full-text search finds for ``query`` (the admin's search)."""
    return _matched(messages, query)


def matching_conversations(
    *, conversations: QuerySet[Conversation], query: str
) -> QuerySet[Conversation]:
    """``conversations`` holding a message the full-text search finds for ``query``."""
    found = _matched(Message.objects.all(), query).values("conversation_id")
    return conversations.filter(pk__in=found)


def _words(query: str) -> Sequence[str]:
    return query_words(query)[: max_words()]


def _fts_query(query: str) -> str:
    # Each word a quoted string then `*` (a prefix): FTS5 reads no operator (AND, NEAR,
    # column filters, ...) from the user. \w+ words hold no quote; doubled all the same.
    return " ".join('"{}"*'.format(word.replace('"', '""')) for word in _words(query))


def _tsquery(query: str) -> str:
    # Each word a quoted lexeme with :* (a prefix), joined by &: to_tsquery reads no
    # operator (|, !, <->, parentheses, weights) from the user.
    quoted = (word.replace("\\", "\\\\").replace("'", "''") for word in _words(query))
    return " & ".join(f"'{word}':*" for word in quoted)


def _matched(messages: QuerySet[Message], query: str) -> QuerySet[Message]:
    """Only the messages holding every word (no table names: safe inside a subquery)."""
    if not _words(query):
        return messages.none()
    if connection.vendor == "postgresql":
        return messages.filter(
            RawSQL(
                "search_vector @@ to_tsquery(%s::regconfig, %s)",
                (search_config(), _tsquery(query)),
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
    tsquery = "to_tsquery(%s::regconfig, %s)"
    document = _DOCUMENT_SQL.format(aggregate="string_agg(c.name || ' ' || c.arguments::text, ' ')")
    options = f"StartSel={START}, StopSel={STOP}, MaxWords=30, MinWords=8, MaxFragments=2"
    return messages.annotate(
        rank=RawSQL(  # noqa: S611 - constant SQL, input as parameters
            f"ts_rank(conversations_message.search_vector, {tsquery})",
            (config, text),
            output_field=FloatField(),
        ),
        snippet=RawSQL(  # noqa: S611 - constant SQL, input as parameters
            # The markers stored in a message are taken out first: only ours mark a hit.
            f"ts_headline(%s::regconfig, translate({document}, %s, ''), {tsquery}, %s)",
            (config, START + STOP, config, text, options),
            output_field=TextField(),
        ),
    ).order_by("-rank", "-pk")


def _sqlite_rank(messages: QuerySet[Message], match: str) -> QuerySet[Message]:
    hit = (
        "FROM conversations_message_fts WHERE conversations_message_fts MATCH %s"
        " AND conversations_message_fts.rowid = conversations_message.id"
    )
    # FTS5 makes snippets of the stored document, which may hold our markers: it marks
    # with two random words instead, the stored markers are dropped, then the random
    # words become ours (a message cannot guess them).
    start, stop = secrets.token_hex(12), secrets.token_hex(12)
    snippet = (
        f"snippet(conversations_message_fts, 0, '{start}', '{stop}', '…', 24)"  # hex: no quote
    )
    clean = f"replace(replace({snippet}, char(57344), ''), char(57345), '')"
    return messages.annotate(
        rank=RawSQL(  # noqa: S611 - constant SQL, input as parameters
            f"(SELECT -bm25(conversations_message_fts) {hit})", (match,), output_field=FloatField()
        ),
        snippet=RawSQL(  # noqa: S611 - constant SQL and random hex, input as parameters
            f"(SELECT replace(replace({clean}, '{start}', char(57344)), '{stop}', char(57345))"
            f" {hit})",
            (match,),
            output_field=TextField(),
        ),
    ).order_by("-rank", "-pk")


def highlight(snippet: str) -> str:
    """The snippet as HTML: its text escaped, its matches in ``<mark>``."""
    return escape(snippet, quote=False).replace(START, "<mark>").replace(STOP, "</mark>")
