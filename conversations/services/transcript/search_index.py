"""The full-text index of messages, kept by the database itself.

What a message is found by: its content, the name of the call a tool message
answers, and the names and argument values (strings and numbers, not keys)
of the calls an assistant message makes.

- PostgreSQL: a ``tsvector`` column ``conversations_message.search_vector``
  (not a model field: only the database writes it), GIN-indexed, computed by
  a trigger on messages and refreshed by triggers on tool calls (calls are
  stored after their message). The text search configuration is
  ``CONVERSATIONS["SEARCH_CONFIG"]`` as it was when the document function was
  installed; :func:`rebuild_search_index` installs it again with the current
  one and recomputes every row.
- SQLite: an FTS5 table ``conversations_message_fts`` whose rowid is the
  message id, kept in step by triggers on both tables.

The triggers and functions are defined with the database rules, in
``conversations.models.rules`` (``search_index=True``); this module creates
the column, table and index around them, and fills them. Installing is
idempotent, so it also repairs an index whose triggers a SQLite table
rebuild dropped.
"""

from __future__ import annotations

from typing import Any, Final

from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from conversations.models.rules import drop_rules, install_rules, rules
from conversations.models.rules.sqlite import MESSAGE_DOCUMENT
from conversations.selectors.search import search_config

__all__ = [
    "POSTGRES_SEARCH_FUNCTIONS",
    "POSTGRES_SEARCH_TRIGGERS",
    "SQLITE_SEARCH_TRIGGERS",
    "install_search_index",
    "install_search_triggers",
    "rebuild_search_index",
    "remove_search_index",
]


def _search_rules(vendor: str) -> tuple[str, ...]:
    return tuple(rule.name for rule in rules(vendor) if rule.search_index)


POSTGRES_SEARCH_FUNCTIONS: Final = _search_rules("postgresql")
POSTGRES_SEARCH_TRIGGERS: Final = tuple(
    rule.name for rule in rules("postgresql") if rule.search_index and rule.table
)
SQLITE_SEARCH_TRIGGERS: Final = _search_rules("sqlite")

_POSTGRES_REFRESH: Final = (
    "UPDATE conversations_message"
    " SET search_vector = conversations_search_document(content, tool_call_id, id);"
)
_SQLITE_REFRESH: Final = [
    "DELETE FROM conversations_message_fts;",
    "INSERT INTO conversations_message_fts(rowid, document)"
    f" SELECT m.id, {MESSAGE_DOCUMENT} FROM conversations_message m;",
]


# Installing ---------------------------------------------------------------------------------


def install_search_index(conn: BaseDatabaseWrapper, *, config: str | None = None) -> None:
    """Create the column/table, index and triggers on ``conn``, and fill them.

    Idempotent: it also repairs an index whose triggers a table rebuild dropped.
    """
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(
                "ALTER TABLE conversations_message ADD COLUMN IF NOT EXISTS search_vector tsvector"
            )
        elif conn.vendor == "sqlite":
            cursor.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS conversations_message_fts USING fts5("
                "document, tokenize = 'unicode61 remove_diacritics 2');"
            )
    install_search_triggers(conn, config=config)
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(_POSTGRES_REFRESH)
            cursor.execute(
                "CREATE INDEX IF NOT EXISTS conversations_message_search_vector"
                " ON conversations_message USING gin (search_vector)"
            )
        elif conn.vendor == "sqlite":
            for sql in _SQLITE_REFRESH:
                cursor.execute(sql)


def install_search_triggers(conn: BaseDatabaseWrapper, *, config: str | None = None) -> None:
    """Replace the index's triggers and functions on ``conn`` with the current ones; no refill.

    For a migration that changes only how the triggers keep the index (the
    documents they write are the same), so it does not rewrite every message.
    """
    if config is None and conn.vendor == "postgresql":
        config = search_config()
    install_rules(conn, search_config=config or "", names=_search_rules(conn.vendor))


def remove_search_index(conn: BaseDatabaseWrapper) -> None:
    """Drop what :func:`install_search_index` created."""
    drop_rules(conn, names=_search_rules(conn.vendor))
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute("DROP INDEX IF EXISTS conversations_message_search_vector")
            cursor.execute("ALTER TABLE conversations_message DROP COLUMN IF EXISTS search_vector")
        elif conn.vendor == "sqlite":
            cursor.execute("DROP TABLE IF EXISTS conversations_message_fts")


def rebuild_search_index(*, using: Any = None) -> None:
    """Install the search function again with the current configuration and reindex every row.

    Needed after changing ``CONVERSATIONS["SEARCH_CONFIG"]`` (PostgreSQL); on
    SQLite it rebuilds the FTS5 rows (harmless, and a repair if they drifted).
    """
    conn = using or connection
    with transaction.atomic(using=conn.alias):
        install_search_triggers(conn)
        with conn.cursor() as cursor:
            if conn.vendor == "postgresql":
                cursor.execute(_POSTGRES_REFRESH)
            elif conn.vendor == "sqlite":
                for sql in _SQLITE_REFRESH:
                    cursor.execute(sql)
