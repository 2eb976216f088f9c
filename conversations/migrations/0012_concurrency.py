"""``timed_out`` joins the statuses of tool calls: a call that ran past its timeout.

The status rule is a CHECK constraint (``conversations_toolcall_status_valid``),
so it is dropped and added again with the new list. On SQLite that rebuilds
``conversations_toolcall``, which would drop the rule triggers on it and trip
those around it, so every trigger of the app's tables is saved and dropped
first and created again from its own SQL at the end (as in 0010).
PostgreSQL alters in place. No trigger names a call status other than
``running`` and ``succeeded`` (the approval rule), so none changes.
"""

from django.db import migrations, models

_saved_triggers: list[str] = []


def _drop_sqlite_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
            " AND tbl_name LIKE 'conversations\\_%' ESCAPE '\\' ORDER BY name"
        )
        rows = cursor.fetchall()
    _saved_triggers[:] = [sql for _name, sql in rows]
    for name, _sql in rows:
        schema_editor.execute(f'DROP TRIGGER IF EXISTS "{name}"', params=None)


def _restore_sqlite_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for sql in _saved_triggers:
        schema_editor.execute(sql, params=None)
    _saved_triggers.clear()


_STATUSES = [
    "pending",
    "running",
    "succeeded",
    "failed",
    "rejected",
    "interrupted",
    "cancelled",
    "awaiting_approval",
    "timed_out",
]


class Migration(migrations.Migration):

    dependencies = [
        ("conversations", "0011_mcp"),
    ]

    operations = [
        migrations.RunPython(_drop_sqlite_triggers, _restore_sqlite_triggers, elidable=False),
        migrations.RemoveConstraint(
            model_name="toolcall",
            name="conversations_toolcall_status_valid",
        ),
        migrations.AlterField(
            model_name="toolcall",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("rejected", "Rejected"),
                    ("interrupted", "Interrupted"),
                    ("cancelled", "Cancelled"),
                    ("awaiting_approval", "Awaiting approval"),
                    ("timed_out", "Timed out"),
                ],
                default="pending",
                max_length=32,
            ),
        ),
        migrations.AddConstraint(
            model_name="toolcall",
            constraint=models.CheckConstraint(
                condition=models.Q(("status__in", _STATUSES)),
                name="conversations_toolcall_status_valid",
            ),
        ),
        migrations.RunPython(_restore_sqlite_triggers, _drop_sqlite_triggers, elidable=False),
    ]
