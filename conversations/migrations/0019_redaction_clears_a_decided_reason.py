"""A decided approval's reason may now be cleared (redaction); every rule installed again.

``conversations_toolapproval_decision_final`` refused any change to a decided
approval but its decider (set to NULL when that user is deleted). Redacting a
conversation must also empty the reviewer's reason, which quotes or describes
the user's call: the rule now lets the reason change to the empty string, and
to nothing else. Every rule is installed from ``conversations.models.rules``
as ``0017`` does (docs/adr/0018); going back puts the previous rule back,
its SQL kept here.
"""

from django.db import migrations

RULES_DIGEST = "834f9c832c727881c7be6cdec1aa7ca7325faf2d1b5d904dfa47b192444838a7"

RULE = "conversations_toolapproval_decision_final"

_PREVIOUS_POSTGRESQL = (
    f"""CREATE OR REPLACE FUNCTION {RULE}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.decision <> '' AND (NEW.decision IS DISTINCT FROM OLD.decision
        OR NEW.reason IS DISTINCT FROM OLD.reason
        OR NEW.decided_at IS DISTINCT FROM OLD.decided_at
        OR NEW.arguments_digest IS DISTINCT FROM OLD.arguments_digest
        OR NEW.level IS DISTINCT FROM OLD.level
        OR NEW.tool_call_id IS DISTINCT FROM OLD.tool_call_id
        OR NEW.run_id IS DISTINCT FROM OLD.run_id
        OR NEW.requested_at IS DISTINCT FROM OLD.requested_at
        OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
        OR (NEW.decided_by_id IS NOT NULL AND NEW.decided_by_id IS DISTINCT FROM OLD.decided_by_id))
    THEN
        RAISE EXCEPTION 'approval of tool call % is already decided', OLD.tool_call_id
        USING ERRCODE = 'check_violation', CONSTRAINT = '{RULE}', TABLE = TG_TABLE_NAME;
    END IF;
    RETURN NEW;
END
$$;""",
    f"DROP TRIGGER IF EXISTS {RULE} ON conversations_toolapproval;",
    f"""CREATE TRIGGER {RULE}
BEFORE UPDATE ON conversations_toolapproval FOR EACH ROW
EXECUTE FUNCTION {RULE}();""",
)

_PREVIOUS_SQLITE = (
    f"DROP TRIGGER IF EXISTS {RULE};",
    f"""CREATE TRIGGER {RULE} BEFORE UPDATE ON conversations_toolapproval FOR EACH ROW
WHEN OLD.decision <> '' AND (NEW.decision IS NOT OLD.decision
         OR NEW.reason IS NOT OLD.reason
         OR NEW.decided_at IS NOT OLD.decided_at
         OR NEW.arguments_digest IS NOT OLD.arguments_digest
         OR NEW.level IS NOT OLD.level
         OR NEW.tool_call_id IS NOT OLD.tool_call_id
         OR NEW.run_id IS NOT OLD.run_id
         OR NEW.requested_at IS NOT OLD.requested_at
         OR NEW.expires_at IS NOT OLD.expires_at
         OR (NEW.decided_by_id IS NOT NULL AND NEW.decided_by_id IS NOT OLD.decided_by_id))
BEGIN SELECT RAISE(ABORT, '{RULE}: a decided approval cannot change'); END;""",
)


def _install(apps, schema_editor):
    from conversations.models.rules import install_rules
    from conversations.selectors.search import search_config

    connection = schema_editor.connection
    config = search_config() if connection.vendor == "postgresql" else ""
    install_rules(connection, search_config=config)


def _previous(apps, schema_editor):
    connection = schema_editor.connection
    statements = {"postgresql": _PREVIOUS_POSTGRESQL, "sqlite": _PREVIOUS_SQLITE}
    with connection.cursor() as cursor:
        for sql in statements.get(connection.vendor, ()):
            cursor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0018_responses_adapter"),
    ]

    operations = [
        migrations.RunPython(_install, _previous, elidable=False),
    ]
