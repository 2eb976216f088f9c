"""Rule-8 triggers that look at the last turn only, through an index; statement-level on PostgreSQL.

``message_no_orphans`` used to read every call of the conversation on each
user/system/assistant message: its cost grew with the conversation. Every
earlier such message was itself checked when it was inserted, so only the
calls of the last turn before the new message can be open (later turns
cannot have been added after unanswered calls, and history columns never
change). The check now finds that turn with one probe of a partial index on
``(conversation, position)`` of the non-tool messages, reads its calls by
their message, and refuses as before: any of them not answered before the
new message, or any call made after it (which cannot be answered before it).
``toolcall_no_orphans`` finds the turn after the call's message the same way.
The cost is the same at 10 calls or 10,000.

On PostgreSQL the rules of a call insert, and the answer and rule-8 rules of
a message insert, become statement-level triggers over the inserted rows
(``REFERENCING NEW TABLE``): a turn's k calls or k results are checked by one
query each, not k. They still take the conversation's row lock first. The
errors name the same constraints, about the first offending row.

SQLite has no statement-level triggers with transition tables; its two
rule-8 triggers are replaced by the index-probing form. Nothing is rebuilt
there (creating an index is a plain ``CREATE INDEX``).

Reverse: the triggers of ``0002_triggers`` (with ``0004``'s plan setting).
"""

from importlib import import_module

from django.db import migrations, models

_old = import_module("conversations.migrations.0002_triggers")

_TURN = "NOT ({alias}.role = 'tool')"
"""The partial index's condition, written as the index has it (SQLite matches terms literally)."""


def _raise(constraint: str, message: str, *args: str) -> str:
    arguments = "".join(f", {arg}" for arg in args)
    return (
        f"RAISE EXCEPTION '{message}'{arguments}\n"
        f"        USING ERRCODE = 'check_violation', CONSTRAINT = '{constraint}',"
        " TABLE = TG_TABLE_NAME;"
    )


def _function(name: str, body: str, declare: str = "") -> str:
    return (
        f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql\n"
        "SET plan_cache_mode = force_custom_plan AS $$\n"
        f"{declare}BEGIN\n{body}\n    RETURN NULL;\nEND\n$$;"
    )


def _statement_trigger(name: str, table: str, rows: str) -> str:
    return (
        f"CREATE TRIGGER {name} AFTER INSERT ON {table}"
        f" REFERENCING NEW TABLE AS {rows} FOR EACH STATEMENT EXECUTE FUNCTION {name}();"
    )


def _found_raise(constraint: str, message: str, *args: str) -> str:
    return f"    IF FOUND THEN\n        {_raise(constraint, message, *args)}\n    END IF;"


_LOCK_CALLS = (
    "    PERFORM 1 FROM conversations_conversation\n"
    "     WHERE id IN (SELECT conversation_id FROM new_calls) ORDER BY id FOR NO KEY UPDATE;\n"
)
_LOCK_TURNS = (
    "    PERFORM 1 FROM conversations_conversation\n"
    "     WHERE id IN (SELECT conversation_id FROM new_messages WHERE role <> 'tool')\n"
    "     ORDER BY id FOR NO KEY UPDATE;\n"
)

# The calls open before a new message n: those of the last turn before it not
# answered before it, and any call made after it.
_OPEN_BEFORE = (
    "SELECT c.id, c.call_id FROM conversations_toolcall c\n"
    "      WHERE c.message_id = (SELECT l.id FROM conversations_message l\n"
    "                             WHERE l.conversation_id = {n}.conversation_id\n"
    '                               AND l."position" < {n}."position" AND ' + _TURN.format(alias="l")
    + '\n                             ORDER BY l."position" DESC LIMIT 1)\n'
    "        AND NOT EXISTS (SELECT 1 FROM conversations_message r\n"
    '                         WHERE r.tool_call_id = c.id AND r."position" < {n}."position")\n'
    "     UNION ALL\n"
    "     SELECT c.id, c.call_id FROM conversations_message a\n"
    "       JOIN conversations_toolcall c ON c.message_id = a.id\n"
    "      WHERE a.conversation_id = {n}.conversation_id\n"
    '        AND a."position" > {n}."position" AND ' + _TURN.format(alias="a")
)

_LATER_TURN = (
    "EXISTS (SELECT 1 FROM conversations_message later\n"
    "         WHERE later.conversation_id = own.conversation_id\n"
    '           AND later."position" > own."position" AND ' + _TURN.format(alias="later") + ")"
)

PG_TRIGGERS = [
    # (name, table, function SQL, trigger SQL)
    (
        "conversations_toolcall_assistant_message",
        "conversations_toolcall",
        _function(
            "conversations_toolcall_assistant_message",
            "    SELECT n.call_id INTO bad FROM new_calls n\n"
            "     WHERE NOT EXISTS (SELECT 1 FROM conversations_message m\n"
            "                        WHERE m.id = n.message_id AND m.role = 'assistant')\n"
            "     ORDER BY n.id LIMIT 1;\n"
            + _found_raise(
                "conversations_toolcall_assistant_message",
                "tool call % must belong to an assistant message",
                "bad",
            ),
            declare="DECLARE\n    bad text;\n",
        ),
        _statement_trigger(
            "conversations_toolcall_assistant_message", "conversations_toolcall", "new_calls"
        ),
    ),
    (
        "conversations_toolcall_conversation_match",
        "conversations_toolcall",
        _function(
            "conversations_toolcall_conversation_match",
            "    SELECT n.call_id INTO bad FROM new_calls n\n"
            "     WHERE NOT EXISTS (SELECT 1 FROM conversations_message m\n"
            "                        WHERE m.id = n.message_id\n"
            "                          AND m.conversation_id = n.conversation_id)\n"
            "     ORDER BY n.id LIMIT 1;\n"
            + _found_raise(
                "conversations_toolcall_conversation_match",
                "tool call % must be in the conversation of its message",
                "bad",
            ),
            declare="DECLARE\n    bad text;\n",
        ),
        _statement_trigger(
            "conversations_toolcall_conversation_match", "conversations_toolcall", "new_calls"
        ),
    ),
    (
        "conversations_toolcall_no_orphans",
        "conversations_toolcall",
        _function(
            "conversations_toolcall_no_orphans",
            _LOCK_CALLS
            + "    SELECT n.call_id INTO bad FROM new_calls n\n"
            "      JOIN conversations_message own ON own.id = n.message_id\n"
            f"     WHERE {_LATER_TURN}\n"
            "     ORDER BY n.id LIMIT 1;\n"
            + _found_raise(
                "conversations_toolcall_no_orphans",
                "tool call % cannot be added to an assistant turn that later messages follow",
                "bad",
            ),
            declare="DECLARE\n    bad text;\n",
        ),
        _statement_trigger(
            "conversations_toolcall_no_orphans", "conversations_toolcall", "new_calls"
        ),
    ),
    (
        "conversations_message_answer_pairing",
        "conversations_message",
        _function(
            "conversations_message_answer_pairing",
            "    PERFORM 1 FROM new_messages n\n"
            "      LEFT JOIN conversations_toolcall c ON c.id = n.tool_call_id\n"
            "      LEFT JOIN conversations_message m ON m.id = c.message_id\n"
            "     WHERE n.tool_call_id IS NOT NULL\n"
            "       AND (c.id IS NULL OR c.conversation_id <> n.conversation_id\n"
            '            OR m."position" >= n."position")\n'
            "     LIMIT 1;\n"
            + _found_raise(
                "conversations_message_answer_pairing",
                "a tool message must answer a call of its conversation made before it",
            ),
        ),
        _statement_trigger(
            "conversations_message_answer_pairing", "conversations_message", "new_messages"
        ),
    ),
    (
        "conversations_message_no_orphans",
        "conversations_message",
        _function(
            "conversations_message_no_orphans",
            _LOCK_TURNS
            + "    SELECT n.role, pending.calls INTO bad_role, open_calls FROM new_messages n\n"
            "      CROSS JOIN LATERAL (\n"
            "        SELECT string_agg(o.call_id, ', ' ORDER BY o.id) AS calls\n"
            f"          FROM ({_OPEN_BEFORE.format(n='n')}) o\n"
            "      ) pending\n"
            "     WHERE n.role <> 'tool' AND pending.calls IS NOT NULL\n"
            '     ORDER BY n."position" LIMIT 1;\n'
            + _found_raise(
                "conversations_message_no_orphans",
                "a % message cannot follow unanswered tool calls: %",
                "bad_role",
                "open_calls",
            ),
            declare="DECLARE\n    bad_role text;\n    open_calls text;\n",
        ),
        _statement_trigger(
            "conversations_message_no_orphans", "conversations_message", "new_messages"
        ),
    ),
]

SQLITE_TRIGGERS = [
    (
        "conversations_toolcall_no_orphans",
        _old._sqlite_trigger(
            "conversations_toolcall_no_orphans",
            "BEFORE INSERT",
            "conversations_toolcall",
            "EXISTS (SELECT 1 FROM conversations_message own"
            f" WHERE own.id = NEW.message_id AND {_LATER_TURN})",
            "a tool call cannot be added to an assistant turn that later messages follow",
        ),
    ),
    (
        "conversations_message_no_orphans",
        _old._sqlite_trigger(
            "conversations_message_no_orphans",
            "BEFORE INSERT",
            "conversations_message",
            f"NEW.role <> 'tool' AND EXISTS ({_OPEN_BEFORE.format(n='NEW')})",
            "a user, system or assistant message cannot follow unanswered tool calls",
        ),
    ),
]

_NAMES = [name for name, *_rest in PG_TRIGGERS]


def install(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for name, table, function_sql, trigger_sql in PG_TRIGGERS:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table};", params=None)
            schema_editor.execute(function_sql, params=None)
            schema_editor.execute(trigger_sql, params=None)
    elif vendor == "sqlite":
        for name, trigger_sql in SQLITE_TRIGGERS:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name};", params=None)
            schema_editor.execute(trigger_sql, params=None)


def restore(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for name, table, function_sql, trigger_sql in _old.PG_TRIGGERS:
            if name not in _NAMES:
                continue
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table};", params=None)
            schema_editor.execute(f"DROP FUNCTION IF EXISTS {name}();", params=None)
            schema_editor.execute(function_sql, params=None)
            schema_editor.execute(trigger_sql, params=None)
            schema_editor.execute(
                f"ALTER FUNCTION {name}() SET plan_cache_mode = force_custom_plan", params=None
            )
    elif vendor == "sqlite":
        old = dict(_old.SQLITE_TRIGGERS)
        for name, _sql in SQLITE_TRIGGERS:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name};", params=None)
            schema_editor.execute(old[name], params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0013_concurrency"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("role", "tool"), _negated=True),
                fields=["conversation", "position"],
                name="conversations_message_turn_idx",
            ),
        ),
        migrations.RunPython(install, restore, elidable=False),
    ]
