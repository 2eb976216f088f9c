"""PostgreSQL: plan the trigger functions' queries for each call, not once.

PL/pgSQL caches a generic plan for a function's queries after a few calls. A
plan made while the tables were small (a fresh database, a test run) can stay
a sequential scan of ``conversations_toolcall`` for the whole life of a
connection, so inserting a message got slower with every stored call (seen:
0.7 ms growing to 150 ms at 8,000 calls). ``plan_cache_mode =
force_custom_plan`` makes each call plan with its actual values and current
statistics, so the indexes are used. SQLite has no plan cache to tune.
"""

from django.db import migrations

FUNCTIONS = (
    "conversations_message_answer_kept",
    "conversations_message_answer_pairing",
    "conversations_message_immutable",
    "conversations_message_no_orphans",
    "conversations_toolcall_assistant_message",
    "conversations_toolcall_conversation_match",
    "conversations_toolcall_immutable",
    "conversations_toolcall_no_orphans",
)


def _alter(setting: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for name in FUNCTIONS:
            schema_editor.execute(f"ALTER FUNCTION {name}() {setting}")

    return run


class Migration(migrations.Migration):
    dependencies = [("conversations", "0003_run_claimed_at_worker")]

    operations = [
        migrations.RunPython(
            _alter("SET plan_cache_mode = force_custom_plan"),
            _alter("RESET plan_cache_mode"),
        ),
    ]
