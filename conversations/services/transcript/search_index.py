"""The full-text index of messages, kept by the database itself.

What a message is found by: its content, the name of the call a tool message
answers, and the names and argument values (strings and numbers, not keys)
of the calls an assistant message makes.

- PostgreSQL: a ``tsvector`` column ``conversations_message.search_vector``
  (not a model field: only the database writes it), GIN-indexed, computed by
  a ``BEFORE INSERT OR UPDATE`` trigger on messages and refreshed by
  triggers on tool calls (calls are stored after their message): once per
  ``INSERT`` statement for each message it gave calls (a turn's k calls are
  one statement: the message is rewritten once, not k times), and row by row
  when a call's name or arguments change. The text search configuration is
  ``CONVERSATIONS["SEARCH_CONFIG"]`` as it was when the function was
  installed; :func:`rebuild_search_index` installs it again with the current
  one and recomputes every row.
- SQLite: an FTS5 table ``conversations_message_fts`` whose rowid is the
  message id, kept in step by triggers on both tables. SQLite has no
  statement-level triggers: an inserted call appends its own words to its
  message's document (which ends with the words of its calls), instead of
  reading every call of the message again for each one.

The DDL lives here rather than frozen in a migration because the PostgreSQL
function depends on a setting: the migration and the rebuild must install
the same thing. A later migration that rebuilds ``conversations_message`` or
``conversations_toolcall`` on SQLite drops the triggers on that table and
must call :func:`install_search_index` again.
"""

from __future__ import annotations

from typing import Any, Final

from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

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

POSTGRES_SEARCH_TRIGGERS: Final = (
    "conversations_message_search",
    "conversations_toolcall_search",
    "conversations_toolcall_search_insert",
)
POSTGRES_SEARCH_FUNCTIONS: Final = (*POSTGRES_SEARCH_TRIGGERS, "conversations_search_document")
SQLITE_SEARCH_TRIGGERS: Final = (
    "conversations_message_search_insert",
    "conversations_message_search_update",
    "conversations_message_search_delete",
    "conversations_toolcall_search_insert",
    "conversations_toolcall_search_update",
)


# PostgreSQL ---------------------------------------------------------------------------------


def _postgres_function_sql(config: str) -> list[str]:
    cfg = f"'{config}'::regconfig"
    return [
        # STABLE, not IMMUTABLE: it reads the calls of the message.
        "CREATE OR REPLACE FUNCTION conversations_search_document("
        "body text, answered bigint, message bigint) RETURNS tsvector"
        " LANGUAGE sql STABLE AS $$\n"
        f"SELECT to_tsvector({cfg}, coalesce(body, ''))\n"
        f"    || to_tsvector({cfg}, coalesce((SELECT c.name FROM conversations_toolcall c"
        " WHERE c.id = answered), ''))\n"
        f"    || (SELECT to_tsvector({cfg}, coalesce(string_agg(c.name, ' '), ''))"
        f"        || jsonb_to_tsvector({cfg}, coalesce(jsonb_agg(c.arguments), '[]'::jsonb),"
        ' \'["string", "numeric"]\')\n'
        "        FROM conversations_toolcall c WHERE c.message_id = message)\n"
        "$$;",
        *_POSTGRES_TRIGGER_FUNCTIONS,
    ]


# The trigger functions do not depend on the configuration (the document function does).
_POSTGRES_TRIGGER_FUNCTIONS: Final = [
    "CREATE OR REPLACE FUNCTION conversations_message_search() RETURNS trigger"
    " LANGUAGE plpgsql AS $$\nBEGIN\n"
    "    NEW.search_vector := conversations_search_document("
    "NEW.content, NEW.tool_call_id, NEW.id);\n"
    "    RETURN NEW;\nEND\n$$;",
    "CREATE OR REPLACE FUNCTION conversations_toolcall_search() RETURNS trigger"
    " LANGUAGE plpgsql AS $$\nBEGIN\n"
    "    UPDATE conversations_message m\n"
    "       SET search_vector = conversations_search_document(m.content, m.tool_call_id, m.id)\n"
    "     WHERE m.id = NEW.message_id;\n"
    "    RETURN NULL;\nEND\n$$;",
    # The calls of one INSERT statement, whatever their number: each message
    # once (a turn's calls are one statement for one message). One primary key
    # lookup per message, planned with the message's id: a single UPDATE joined
    # to the transition table could keep a plan made for another size.
    "CREATE OR REPLACE FUNCTION conversations_toolcall_search_insert() RETURNS trigger"
    " LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$\n"
    "DECLARE\n    message bigint;\nBEGIN\n"
    "    FOR message IN SELECT DISTINCT message_id FROM new_calls LOOP\n"
    "        UPDATE conversations_message m\n"
    "           SET search_vector = conversations_search_document("
    "m.content, m.tool_call_id, m.id)\n"
    "         WHERE m.id = message;\n"
    "    END LOOP;\n"
    "    RETURN NULL;\nEND\n$$;",
]


_POSTGRES_TRIGGER_SQL: Final = [
    "DROP TRIGGER IF EXISTS conversations_message_search ON conversations_message;",
    "DROP TRIGGER IF EXISTS conversations_toolcall_search ON conversations_toolcall;",
    "CREATE TRIGGER conversations_message_search"
    " BEFORE INSERT OR UPDATE OF content, tool_call_id ON conversations_message"
    " FOR EACH ROW EXECUTE FUNCTION conversations_message_search();",
    "DROP TRIGGER IF EXISTS conversations_toolcall_search_insert ON conversations_toolcall;",
    # A transition table cannot go with a column list: updates stay row by row (rare).
    "CREATE TRIGGER conversations_toolcall_search"
    " AFTER UPDATE OF name, arguments ON conversations_toolcall"
    " FOR EACH ROW EXECUTE FUNCTION conversations_toolcall_search();",
    "CREATE TRIGGER conversations_toolcall_search_insert"
    " AFTER INSERT ON conversations_toolcall REFERENCING NEW TABLE AS new_calls"
    " FOR EACH STATEMENT EXECUTE FUNCTION conversations_toolcall_search_insert();",
]

_POSTGRES_REFRESH: Final = (
    "UPDATE conversations_message"
    " SET search_vector = conversations_search_document(content, tool_call_id, id);"
)


# SQLite -------------------------------------------------------------------------------------


def _sqlite_words_of_call(call: str) -> str:
    """A call's name and the string and number values of its arguments."""
    return (
        f"{call}.name || ' ' || coalesce((SELECT group_concat(j.atom, ' ')"
        f" FROM json_tree({call}.arguments) j WHERE j.type IN ('text', 'integer', 'real')), '')"
    )


_SQLITE_CALL_TEXT: Final = (
    f"coalesce((SELECT group_concat({_sqlite_words_of_call('c')}, ' ')"
    " FROM conversations_toolcall c WHERE c.message_id = m.id), '')"
)
_SQLITE_DOCUMENT: Final = (
    "m.content || ' ' || coalesce((SELECT a.name FROM conversations_toolcall a"
    " WHERE a.id = m.tool_call_id), '') || ' ' || " + _SQLITE_CALL_TEXT
)


def _sqlite_index(message: str) -> str:
    return (
        "INSERT INTO conversations_message_fts(rowid, document)"
        f" SELECT m.id, {_SQLITE_DOCUMENT} FROM conversations_message m WHERE m.id = {message};"
    )


def _sqlite_reindex(message: str) -> str:
    return f"DELETE FROM conversations_message_fts WHERE rowid = {message}; " + _sqlite_index(
        message
    )


_SQLITE_SQL: Final = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS conversations_message_fts USING fts5("
    "document, tokenize = 'unicode61 remove_diacritics 2');",
    "CREATE TRIGGER conversations_message_search_insert AFTER INSERT ON conversations_message"
    f" FOR EACH ROW BEGIN {_sqlite_index('NEW.id')} END;",
    "CREATE TRIGGER conversations_message_search_update"
    " AFTER UPDATE OF content ON conversations_message"
    f" FOR EACH ROW BEGIN {_sqlite_reindex('NEW.id')} END;",
    "CREATE TRIGGER conversations_message_search_delete AFTER DELETE ON conversations_message"
    " FOR EACH ROW BEGIN DELETE FROM conversations_message_fts WHERE rowid = OLD.id; END;",
    # The new call's words go at the end of its message's document, where the
    # document puts the words of the message's calls (in the order they were stored).
    "CREATE TRIGGER conversations_toolcall_search_insert AFTER INSERT ON conversations_toolcall"
    " FOR EACH ROW BEGIN UPDATE conversations_message_fts"
    f" SET document = document || ' ' || {_sqlite_words_of_call('NEW')}"
    " WHERE rowid = NEW.message_id; END;",
    "CREATE TRIGGER conversations_toolcall_search_update"
    " AFTER UPDATE OF name, arguments ON conversations_toolcall"
    f" FOR EACH ROW BEGIN {_sqlite_reindex('NEW.message_id')} END;",
]

_SQLITE_REFRESH: Final = [
    "DELETE FROM conversations_message_fts;",
    "INSERT INTO conversations_message_fts(rowid, document)"
    f" SELECT m.id, {_SQLITE_DOCUMENT} FROM conversations_message m;",
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
            for sql in _postgres_function_sql(config or search_config()):
                cursor.execute(sql)
        _install_triggers(conn, cursor)
        if conn.vendor == "postgresql":
            cursor.execute(_POSTGRES_REFRESH)
            cursor.execute(
                "CREATE INDEX IF NOT EXISTS conversations_message_search_vector"
                " ON conversations_message USING gin (search_vector)"
            )
        elif conn.vendor == "sqlite":
            for sql in _SQLITE_REFRESH:
                cursor.execute(sql)


def install_search_triggers(conn: BaseDatabaseWrapper) -> None:
    """Replace the index's triggers on ``conn`` with the current ones; the index is not refilled.

    For a migration that changes only how the triggers keep the index (the
    documents they write are the same), so it does not rewrite every message.
    """
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            for sql in _POSTGRES_TRIGGER_FUNCTIONS:
                cursor.execute(sql)
        _install_triggers(conn, cursor)


def _install_triggers(conn: BaseDatabaseWrapper, cursor: Any) -> None:
    if conn.vendor == "postgresql":
        for sql in _POSTGRES_TRIGGER_SQL:
            cursor.execute(sql)
    elif conn.vendor == "sqlite":
        for name in SQLITE_SEARCH_TRIGGERS:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
        for sql in _SQLITE_SQL:
            cursor.execute(sql)


def remove_search_index(conn: BaseDatabaseWrapper) -> None:
    """Drop what :func:`install_search_index` created."""
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(
                "DROP TRIGGER IF EXISTS conversations_message_search ON conversations_message"
            )
            cursor.execute(
                "DROP TRIGGER IF EXISTS conversations_toolcall_search ON conversations_toolcall"
            )
            cursor.execute(
                "DROP TRIGGER IF EXISTS conversations_toolcall_search_insert"
                " ON conversations_toolcall"
            )
            for name in POSTGRES_SEARCH_TRIGGERS:
                cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")
            cursor.execute(
                "DROP FUNCTION IF EXISTS conversations_search_document(text, bigint, bigint)"
            )
            cursor.execute("DROP INDEX IF EXISTS conversations_message_search_vector")
            cursor.execute("ALTER TABLE conversations_message DROP COLUMN IF EXISTS search_vector")
        elif conn.vendor == "sqlite":
            for name in SQLITE_SEARCH_TRIGGERS:
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
            cursor.execute("DROP TABLE IF EXISTS conversations_message_fts")


def rebuild_search_index(*, using: Any = None) -> None:
    """Install the search function again with the current configuration and reindex every row.

    Needed after changing ``CONVERSATIONS["SEARCH_CONFIG"]`` (PostgreSQL); on
    SQLite it rebuilds the FTS5 rows (harmless, and a repair if they drifted).
    """
    conn = using or connection
    with transaction.atomic(using=conn.alias), conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            for sql in _postgres_function_sql(search_config()):
                cursor.execute(sql)
            cursor.execute(_POSTGRES_REFRESH)
        elif conn.vendor == "sqlite":
            for sql in _SQLITE_REFRESH:
                cursor.execute(sql)
