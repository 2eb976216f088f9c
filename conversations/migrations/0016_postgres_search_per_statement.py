"""PostgreSQL: a turn's calls reindex their message once; rule 8 reads only the last turn's answers.

The search index's call trigger recomputed the message's whole document once
per inserted call: a turn of k calls, stored by one ``INSERT``, rewrote the
message k times, each time reading all its calls. On PostgreSQL inserts now
go through a statement-level trigger over the inserted rows (each message
once); a call whose name or arguments change is still reindexed row by row
(a transition table cannot go with a column list). The documents are the
same, so nothing is reindexed. SQLite keeps the triggers of
``0015_sqlite_search_append``.

``conversations_message_no_orphans`` asked whether each call of the last
turn had an answer before the new message with a plain ``NOT EXISTS``, which
PostgreSQL may plan as a hash anti join that reads every message before the
new one to hash the answers. It chose that plan once the messages table was
compact; the old search trigger's per-call rewrites (a dead version of the
message per call, in the test that counts the rows) had kept the table
bloated enough that a probe per call looked cheaper. The answers are now
looked for only between the last turn and the new message, by conversation
and position: whichever join PostgreSQL picks, it reads the turn's answers.

Going back keeps both: they keep the same index and refuse the same rows;
``0009_history`` removes the search triggers with the rest.
"""

from importlib import import_module

from django.db import migrations

_lean = import_module("conversations.migrations.0014_lean_round")


def _last_turn(column: str) -> str:
    """The ``column`` of the last non-tool message before the new message ``n``."""
    return (
        f"(SELECT l.{column} FROM conversations_message l\n"
        "                 WHERE l.conversation_id = n.conversation_id\n"
        '                   AND l."position" < n."position" AND NOT (l.role = \'tool\')\n'
        '                 ORDER BY l."position" DESC LIMIT 1)'
    )


# The calls open before a new message n: those of the last turn before it not
# answered before it, and any call made after it. Only the messages between
# that turn and n can answer its calls (an answer follows its call, and every
# earlier call was answered before the turn was stored), so the answers are
# looked for in that range of positions: however PostgreSQL joins them (an
# index probe per call, or a hash of the range), it reads the turn's answers
# and nothing more.
_OPEN_BEFORE = (
    "SELECT c.id, c.call_id FROM conversations_toolcall c\n"
    f"      WHERE c.message_id = {_last_turn('id')}\n"
    "        AND NOT EXISTS (SELECT 1 FROM conversations_message r\n"
    "                         WHERE r.conversation_id = n.conversation_id\n"
    '                           AND r."position" > ' + _last_turn('"position"') + "\n"
    '                           AND r."position" < n."position"\n'
    "                           AND r.tool_call_id = c.id)\n"
    "     UNION ALL\n"
    "     SELECT c.id, c.call_id FROM conversations_message a\n"
    "       JOIN conversations_toolcall c ON c.message_id = a.id\n"
    "      WHERE a.conversation_id = n.conversation_id\n"
    '        AND a."position" > n."position" AND NOT (a.role = \'tool\')'
)

NO_ORPHANS = _lean._function(
    "conversations_message_no_orphans",
    _lean._LOCK_TURNS
    + "    SELECT n.role, pending.calls INTO bad_role, open_calls FROM new_messages n\n"
    "      CROSS JOIN LATERAL (\n"
    "        SELECT string_agg(o.call_id, ', ' ORDER BY o.id) AS calls\n"
    f"          FROM ({_OPEN_BEFORE}) o\n"
    "      ) pending\n"
    "     WHERE n.role <> 'tool' AND pending.calls IS NOT NULL\n"
    '     ORDER BY n."position" LIMIT 1;\n'
    + _lean._found_raise(
        "conversations_message_no_orphans",
        "a % message cannot follow unanswered tool calls: %",
        "bad_role",
        "open_calls",
    ),
    declare="DECLARE\n    bad_role text;\n    open_calls text;\n",
)


def _install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from conversations.services.transcript.search_index import install_search_triggers

    schema_editor.execute(NO_ORPHANS, params=None)
    install_search_triggers(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0015_sqlite_search_append"),
    ]

    operations = [
        migrations.RunPython(_install, migrations.RunPython.noop, elidable=False),
    ]
