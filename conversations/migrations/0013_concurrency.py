"""``timed_out`` joins the statuses of tool calls: a call that ran past its timeout.

The status rule is a CHECK constraint (``conversations_toolcall_status_valid``),
so it is dropped and added again with the new list. On SQLite that rebuilds
``conversations_toolcall``, which would drop the rule triggers on it and trip
those around it, so every trigger of the app's tables is saved and dropped
first and created again from its own SQL at the end (0010's functions).
PostgreSQL alters in place. No trigger names a call status other than
``running`` and ``succeeded`` (the approval rule), so none changes.
"""

from importlib import import_module

from django.db import migrations, models

# The SQLite trigger save/restore of 0010, which this migration needs as it is.
_hardening = import_module("conversations.migrations.0010_hardening")
_drop_sqlite_triggers = _hardening._drop_sqlite_triggers
_restore_sqlite_triggers = _hardening._restore_sqlite_triggers

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
        ("conversations", "0012_profile_stream"),
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
