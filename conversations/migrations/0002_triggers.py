"""Triggers for the conversation rules that need other rows (docs/data-model.md).

Every trigger is named after the rule it enforces (``conversations_<model>_<rule>``)
and refuses with SQLSTATE class 23 (``check_violation`` on PostgreSQL,
``RAISE(ABORT)`` = ``SQLITE_CONSTRAINT_TRIGGER`` on SQLite), which Django
raises as ``django.db.IntegrityError``.

- ``toolcall_assistant_message`` (rule 3): a call's message is an assistant message.
- ``toolcall_conversation_match``: a call's ``conversation`` is its message's.
- ``toolcall_no_orphans`` (rule 8): no call is added to an assistant turn that a
  user/system/assistant message already follows.
- ``message_answer_pairing`` (rule 4): an answer is in the call's conversation,
  positioned after the call's assistant message.
- ``message_no_orphans`` (rule 8): a user/system/assistant message is refused
  unless every call of the conversation is answered by a message positioned
  before it.
- ``message_immutable`` / ``toolcall_immutable``: the columns the rules above
  read (message: conversation, position, role, tool_call; call: message,
  conversation) never change after insert, so the insert-time checks stay true
  without re-checking every kind of UPDATE.
- ``message_answer_kept`` (rule 8, PostgreSQL only): deleting an answer is
  refused when it leaves its call open with a later user/system/assistant
  message. A deferred constraint trigger, checked at commit, so deleting a whole
  conversation (or a history tail) in any row order passes. SQLite has no
  deferred triggers: a row-by-row check would refuse such legitimate deletes,
  so there the application is responsible.

On PostgreSQL the rule-8 checks first lock the conversation row (``FOR NO KEY
UPDATE``, the lock ``append_messages`` also takes) so two concurrent writers
cannot each miss the other's uncommitted row. SQLite serialises writers anyway.

The SQL lives inline (not imported) so this migration stays a fixed snapshot.
NOTE for later migrations: on SQLite, Django rebuilds a table for many ALTER
operations (``_remake_table``) and the rebuild drops that table's triggers. A
migration that alters ``conversations_message`` or ``conversations_toolcall``
on SQLite must re-create them; ``tests/models/test_migrations.py`` fails when
one is missing.
"""

from django.db import migrations

# PostgreSQL ---------------------------------------------------------------------


def _pg_function(name: str, body: str, declare: str = "") -> str:
    return (
        f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"{declare}BEGIN\n{body}\nEND\n$$;"
    )


def _pg_raise(constraint: str, message: str, *args: str) -> str:
    arguments = "".join(f", {arg}" for arg in args)
    return (
        f"RAISE EXCEPTION '{message}'{arguments}\n"
        f"        USING ERRCODE = 'check_violation', CONSTRAINT = '{constraint}',"
        " TABLE = TG_TABLE_NAME;"
    )


_PG_LOCK = (
    "    PERFORM 1 FROM conversations_conversation WHERE id = {conversation}"
    " FOR NO KEY UPDATE;"
)

PG_TRIGGERS = [
    # (trigger/function name, table, function SQL, trigger SQL)
    (
        "conversations_toolcall_assistant_message",
        "conversations_toolcall",
        _pg_function(
            "conversations_toolcall_assistant_message",
            "    IF NOT EXISTS (SELECT 1 FROM conversations_message m\n"
            "                   WHERE m.id = NEW.message_id AND m.role = 'assistant') THEN\n"
            "        "
            + _pg_raise(
                "conversations_toolcall_assistant_message",
                "tool call % must belong to an assistant message",
                "NEW.call_id",
            )
            + "\n    END IF;\n    RETURN NULL;",
        ),
        "CREATE TRIGGER conversations_toolcall_assistant_message"
        " AFTER INSERT ON conversations_toolcall FOR EACH ROW"
        " EXECUTE FUNCTION conversations_toolcall_assistant_message();",
    ),
    (
        "conversations_toolcall_conversation_match",
        "conversations_toolcall",
        _pg_function(
            "conversations_toolcall_conversation_match",
            "    IF NOT EXISTS (SELECT 1 FROM conversations_message m\n"
            "                   WHERE m.id = NEW.message_id\n"
            "                     AND m.conversation_id = NEW.conversation_id) THEN\n"
            "        "
            + _pg_raise(
                "conversations_toolcall_conversation_match",
                "tool call % must be in the conversation of its message",
                "NEW.call_id",
            )
            + "\n    END IF;\n    RETURN NULL;",
        ),
        "CREATE TRIGGER conversations_toolcall_conversation_match"
        " AFTER INSERT ON conversations_toolcall FOR EACH ROW"
        " EXECUTE FUNCTION conversations_toolcall_conversation_match();",
    ),
    (
        "conversations_toolcall_no_orphans",
        "conversations_toolcall",
        _pg_function(
            "conversations_toolcall_no_orphans",
            _PG_LOCK.format(conversation="NEW.conversation_id")
            + "\n    IF EXISTS (SELECT 1 FROM conversations_message own\n"
            "               JOIN conversations_message later\n"
            "                 ON later.conversation_id = own.conversation_id\n"
            "                AND later.\"position\" > own.\"position\"\n"
            "                AND later.role <> 'tool'\n"
            "               WHERE own.id = NEW.message_id) THEN\n"
            "        "
            + _pg_raise(
                "conversations_toolcall_no_orphans",
                "tool call % cannot be added to an assistant turn that later messages follow",
                "NEW.call_id",
            )
            + "\n    END IF;\n    RETURN NULL;",
        ),
        "CREATE TRIGGER conversations_toolcall_no_orphans"
        " AFTER INSERT ON conversations_toolcall FOR EACH ROW"
        " EXECUTE FUNCTION conversations_toolcall_no_orphans();",
    ),
    (
        "conversations_toolcall_immutable",
        "conversations_toolcall",
        _pg_function(
            "conversations_toolcall_immutable",
            "    "
            + _pg_raise(
                "conversations_toolcall_immutable",
                "the message and conversation of tool call % cannot change",
                "OLD.call_id",
            )
            + "\n    RETURN NEW;",
        ),
        "CREATE TRIGGER conversations_toolcall_immutable"
        " BEFORE UPDATE OF message_id, conversation_id ON conversations_toolcall FOR EACH ROW"
        " WHEN (OLD.message_id IS DISTINCT FROM NEW.message_id"
        " OR OLD.conversation_id IS DISTINCT FROM NEW.conversation_id)"
        " EXECUTE FUNCTION conversations_toolcall_immutable();",
    ),
    (
        "conversations_message_answer_pairing",
        "conversations_message",
        _pg_function(
            "conversations_message_answer_pairing",
            "    SELECT c.conversation_id, m.\"position\" INTO call_conversation, call_position\n"
            "      FROM conversations_toolcall c\n"
            "      JOIN conversations_message m ON m.id = c.message_id\n"
            "     WHERE c.id = NEW.tool_call_id;\n"
            "    IF NOT FOUND OR call_conversation <> NEW.conversation_id\n"
            "       OR call_position >= NEW.\"position\" THEN\n"
            "        "
            + _pg_raise(
                "conversations_message_answer_pairing",
                "a tool message must answer a call of its conversation made before it",
            )
            + "\n    END IF;\n    RETURN NULL;",
            declare="DECLARE\n    call_conversation uuid;\n    call_position integer;\n",
        ),
        "CREATE TRIGGER conversations_message_answer_pairing"
        " AFTER INSERT ON conversations_message FOR EACH ROW"
        " WHEN (NEW.tool_call_id IS NOT NULL)"
        " EXECUTE FUNCTION conversations_message_answer_pairing();",
    ),
    (
        "conversations_message_no_orphans",
        "conversations_message",
        _pg_function(
            "conversations_message_no_orphans",
            _PG_LOCK.format(conversation="NEW.conversation_id")
            + "\n    SELECT string_agg(c.call_id, ', ' ORDER BY c.id) INTO open_calls\n"
            "      FROM conversations_toolcall c\n"
            "     WHERE c.conversation_id = NEW.conversation_id\n"
            "       AND NOT EXISTS (SELECT 1 FROM conversations_message r\n"
            "                        WHERE r.tool_call_id = c.id\n"
            "                          AND r.\"position\" < NEW.\"position\");\n"
            "    IF open_calls IS NOT NULL THEN\n"
            "        "
            + _pg_raise(
                "conversations_message_no_orphans",
                "a % message cannot follow unanswered tool calls: %",
                "NEW.role",
                "open_calls",
            )
            + "\n    END IF;\n    RETURN NULL;",
            declare="DECLARE\n    open_calls text;\n",
        ),
        "CREATE TRIGGER conversations_message_no_orphans"
        " AFTER INSERT ON conversations_message FOR EACH ROW"
        " WHEN (NEW.role <> 'tool')"
        " EXECUTE FUNCTION conversations_message_no_orphans();",
    ),
    (
        "conversations_message_immutable",
        "conversations_message",
        _pg_function(
            "conversations_message_immutable",
            "    "
            + _pg_raise(
                "conversations_message_immutable",
                "the conversation, position, role and tool call of message % cannot change",
                "OLD.id",
            )
            + "\n    RETURN NEW;",
        ),
        "CREATE TRIGGER conversations_message_immutable"
        ' BEFORE UPDATE OF conversation_id, "position", role, tool_call_id'
        " ON conversations_message FOR EACH ROW"
        " WHEN (OLD.conversation_id IS DISTINCT FROM NEW.conversation_id"
        ' OR OLD."position" IS DISTINCT FROM NEW."position"'
        " OR OLD.role IS DISTINCT FROM NEW.role"
        " OR OLD.tool_call_id IS DISTINCT FROM NEW.tool_call_id)"
        " EXECUTE FUNCTION conversations_message_immutable();",
    ),
    (
        "conversations_message_answer_kept",
        "conversations_message",
        _pg_function(
            "conversations_message_answer_kept",
            _PG_LOCK.format(conversation="OLD.conversation_id")
            + "\n    SELECT c.call_id INTO open_call\n"
            "      FROM conversations_toolcall c\n"
            "      JOIN conversations_message a ON a.id = c.message_id\n"
            "     WHERE c.id = OLD.tool_call_id\n"
            "       AND NOT EXISTS (SELECT 1 FROM conversations_message r\n"
            "                        WHERE r.tool_call_id = c.id)\n"
            "       AND EXISTS (SELECT 1 FROM conversations_message later\n"
            "                    WHERE later.conversation_id = a.conversation_id\n"
            '                      AND later."position" > a."position"\n'
            "                      AND later.role <> 'tool');\n"
            "    IF FOUND THEN\n"
            "        "
            + _pg_raise(
                "conversations_message_answer_kept",
                "deleting the answer to tool call % would leave it unanswered"
                " before later messages",
                "open_call",
            )
            + "\n    END IF;\n    RETURN NULL;",
            declare="DECLARE\n    open_call text;\n",
        ),
        "CREATE CONSTRAINT TRIGGER conversations_message_answer_kept"
        " AFTER DELETE ON conversations_message"
        " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
        " WHEN (OLD.tool_call_id IS NOT NULL)"
        " EXECUTE FUNCTION conversations_message_answer_kept();",
    ),
]

# SQLite -------------------------------------------------------------------------


def _sqlite_trigger(name: str, timing: str, table: str, when: str, message: str) -> str:
    return (
        f"CREATE TRIGGER {name} {timing} ON {table} FOR EACH ROW\n"
        f"WHEN {when}\n"
        f"BEGIN SELECT RAISE(ABORT, '{name}: {message}'); END;"
    )


SQLITE_TRIGGERS = [
    (
        "conversations_toolcall_assistant_message",
        _sqlite_trigger(
            "conversations_toolcall_assistant_message",
            "BEFORE INSERT",
            "conversations_toolcall",
            "NOT EXISTS (SELECT 1 FROM conversations_message m"
            " WHERE m.id = NEW.message_id AND m.role = 'assistant')",
            "a tool call must belong to an assistant message",
        ),
    ),
    (
        "conversations_toolcall_conversation_match",
        _sqlite_trigger(
            "conversations_toolcall_conversation_match",
            "BEFORE INSERT",
            "conversations_toolcall",
            "NOT EXISTS (SELECT 1 FROM conversations_message m"
            " WHERE m.id = NEW.message_id AND m.conversation_id = NEW.conversation_id)",
            "a tool call must be in the conversation of its message",
        ),
    ),
    (
        "conversations_toolcall_no_orphans",
        _sqlite_trigger(
            "conversations_toolcall_no_orphans",
            "BEFORE INSERT",
            "conversations_toolcall",
            "EXISTS (SELECT 1 FROM conversations_message own"
            " JOIN conversations_message later"
            " ON later.conversation_id = own.conversation_id"
            ' AND later."position" > own."position" AND later.role <> \'tool\''
            " WHERE own.id = NEW.message_id)",
            "a tool call cannot be added to an assistant turn that later messages follow",
        ),
    ),
    (
        "conversations_toolcall_immutable",
        _sqlite_trigger(
            "conversations_toolcall_immutable",
            "BEFORE UPDATE OF message_id, conversation_id",
            "conversations_toolcall",
            "NEW.message_id IS NOT OLD.message_id OR NEW.conversation_id IS NOT OLD.conversation_id",
            "the message and conversation of a tool call cannot change",
        ),
    ),
    (
        "conversations_message_answer_pairing",
        _sqlite_trigger(
            "conversations_message_answer_pairing",
            "BEFORE INSERT",
            "conversations_message",
            "NEW.tool_call_id IS NOT NULL AND NOT EXISTS ("
            "SELECT 1 FROM conversations_toolcall c"
            " JOIN conversations_message m ON m.id = c.message_id"
            " WHERE c.id = NEW.tool_call_id AND c.conversation_id = NEW.conversation_id"
            ' AND m."position" < NEW."position")',
            "a tool message must answer a call of its conversation made before it",
        ),
    ),
    (
        "conversations_message_no_orphans",
        _sqlite_trigger(
            "conversations_message_no_orphans",
            "BEFORE INSERT",
            "conversations_message",
            "NEW.role <> 'tool' AND EXISTS ("
            "SELECT 1 FROM conversations_toolcall c"
            " WHERE c.conversation_id = NEW.conversation_id"
            " AND NOT EXISTS (SELECT 1 FROM conversations_message r"
            ' WHERE r.tool_call_id = c.id AND r."position" < NEW."position"))',
            "a user, system or assistant message cannot follow unanswered tool calls",
        ),
    ),
    (
        "conversations_message_immutable",
        _sqlite_trigger(
            "conversations_message_immutable",
            'BEFORE UPDATE OF conversation_id, "position", role, tool_call_id',
            "conversations_message",
            "NEW.conversation_id IS NOT OLD.conversation_id"
            ' OR NEW."position" IS NOT OLD."position"'
            " OR NEW.role IS NOT OLD.role"
            " OR NEW.tool_call_id IS NOT OLD.tool_call_id",
            "the conversation, position, role and tool call of a message cannot change",
        ),
    ),
]


def create_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for _name, _table, function_sql, trigger_sql in PG_TRIGGERS:
            schema_editor.execute(function_sql, params=None)
            schema_editor.execute(trigger_sql, params=None)
    elif vendor == "sqlite":
        for _name, trigger_sql in SQLITE_TRIGGERS:
            schema_editor.execute(trigger_sql, params=None)


def drop_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for name, table, _function_sql, _trigger_sql in reversed(PG_TRIGGERS):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table};", params=None)
            schema_editor.execute(f"DROP FUNCTION IF EXISTS {name}();", params=None)
    elif vendor == "sqlite":
        for name, _trigger_sql in reversed(SQLITE_TRIGGERS):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name};", params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(create_triggers, drop_triggers, elidable=False),
    ]
