"""Human approval of tool calls: the approval table, the policies and two rules.

``awaiting_approval`` joins the statuses of runs and tool calls (a longer
column); a run in it still holds its conversation. Two rules need other rows
or the old row, so they are triggers (PostgreSQL and SQLite alike):

- ``toolcall_approval_required``: a call whose approval is pending or
  rejected cannot be marked ``running`` or ``succeeded``.
- ``toolapproval_decision_final``: a decided approval never changes (only
  its decider may become NULL, when that user is deleted).

On SQLite, altering ``conversations_toolcall`` rebuilds the table and would
drop its rule triggers, so they are dropped first and created again at the
end, from the SQL of the trigger migration; PostgreSQL alters in place.
"""

from importlib import import_module

import django.db.models.deletion
import django.db.models.functions.text
import django.db.models.lookups
from django.conf import settings
from django.db import migrations, models

_triggers = import_module("conversations.migrations.0002_triggers")


def _sqlite_only(function):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            function(apps, schema_editor)

    return run


def _decided_changed(distinct: str) -> str:
    """A decided approval changed, except its decider becoming NULL (the user was deleted)."""
    columns = (
        "decision",
        "reason",
        "decided_at",
        "arguments_digest",
        "level",
        "tool_call_id",
        "run_id",
        "requested_at",
        "expires_at",
    )
    changed = " OR ".join(f"NEW.{c} {distinct} OLD.{c}" for c in columns)
    return (
        f"OLD.decision <> '' AND ({changed}"
        f" OR (NEW.decided_by_id IS NOT NULL AND NEW.decided_by_id {distinct} OLD.decided_by_id))"
    )


_APPROVAL_NOT_GRANTED = (
    "EXISTS (SELECT 1 FROM conversations_toolapproval a"
    " WHERE a.tool_call_id = NEW.id AND a.decision <> 'approved')"
)

PG_TRIGGERS = [
    (
        "conversations_toolcall_approval_required",
        "conversations_toolcall",
        "CREATE OR REPLACE FUNCTION conversations_toolcall_approval_required() RETURNS trigger"
        " LANGUAGE plpgsql AS $$\nBEGIN\n"
        "    IF NEW.status IN ('running', 'succeeded') AND " + _APPROVAL_NOT_GRANTED + " THEN\n"
        "        RAISE EXCEPTION 'tool call % has no granted approval', NEW.call_id\n"
        "        USING ERRCODE = 'check_violation',"
        " CONSTRAINT = 'conversations_toolcall_approval_required', TABLE = TG_TABLE_NAME;\n"
        "    END IF;\n    RETURN NEW;\nEND\n$$;",
        "CREATE TRIGGER conversations_toolcall_approval_required"
        " BEFORE UPDATE OF status ON conversations_toolcall FOR EACH ROW"
        " EXECUTE FUNCTION conversations_toolcall_approval_required();",
    ),
    (
        "conversations_toolapproval_decision_final",
        "conversations_toolapproval",
        "CREATE OR REPLACE FUNCTION conversations_toolapproval_decision_final() RETURNS trigger"
        " LANGUAGE plpgsql AS $$\nBEGIN\n"
        "    IF " + _decided_changed("IS DISTINCT FROM") + " THEN\n"
        "        RAISE EXCEPTION 'approval of tool call % is already decided', OLD.tool_call_id\n"
        "        USING ERRCODE = 'check_violation',"
        " CONSTRAINT = 'conversations_toolapproval_decision_final', TABLE = TG_TABLE_NAME;\n"
        "    END IF;\n    RETURN NEW;\nEND\n$$;",
        "CREATE TRIGGER conversations_toolapproval_decision_final"
        " BEFORE UPDATE ON conversations_toolapproval FOR EACH ROW"
        " EXECUTE FUNCTION conversations_toolapproval_decision_final();",
    ),
]

SQLITE_TRIGGERS = [
    (
        "conversations_toolcall_approval_required",
        "CREATE TRIGGER conversations_toolcall_approval_required"
        " BEFORE UPDATE OF status ON conversations_toolcall FOR EACH ROW\n"
        "WHEN NEW.status IN ('running', 'succeeded') AND " + _APPROVAL_NOT_GRANTED + "\n"
        "BEGIN SELECT RAISE(ABORT, 'conversations_toolcall_approval_required:"
        " a call needing approval runs only once approved'); END;",
    ),
    (
        "conversations_toolapproval_decision_final",
        "CREATE TRIGGER conversations_toolapproval_decision_final"
        " BEFORE UPDATE ON conversations_toolapproval FOR EACH ROW\n"
        "WHEN " + _decided_changed("IS NOT") + "\n"
        "BEGIN SELECT RAISE(ABORT, 'conversations_toolapproval_decision_final:"
        " a decided approval cannot change'); END;",
    ),
]


def create_approval_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for _name, _table, function_sql, trigger_sql in PG_TRIGGERS:
            schema_editor.execute(function_sql, params=None)
            schema_editor.execute(trigger_sql, params=None)
    elif vendor == "sqlite":
        for _name, trigger_sql in SQLITE_TRIGGERS:
            schema_editor.execute(trigger_sql, params=None)


def drop_approval_triggers(apps, schema_editor):
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
        ("conversations", "0006_message_is_error_languagemodel_sampling"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(
            _sqlite_only(_triggers.drop_triggers),
            _sqlite_only(_triggers.create_triggers),
            elidable=False,
        ),
        migrations.CreateModel(
            name="ToolApproval",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "level",
                    models.CharField(
                        choices=[("owner", "Owner"), ("staff", "Staff")], max_length=16
                    ),
                ),
                (
                    "arguments_digest",
                    models.CharField(
                        help_text="SHA-256 (hex) of the call's canonical arguments JSON when approval was asked.",
                        max_length=64,
                    ),
                ),
                (
                    "decision",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("", "Pending"),
                            ("approved", "Approved"),
                            ("rejected", "Rejected"),
                        ],
                        default="",
                        max_length=16,
                    ),
                ),
                ("decided_at", models.DateTimeField(blank=True, null=True)),
                ("reason", models.TextField(blank=True)),
                ("requested_at", models.DateTimeField(auto_now_add=True)),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "ordering": ["requested_at", "id"],
                "permissions": [("approve_toolcall", "Can decide staff-level tool call approvals")],
            },
        ),
        migrations.RemoveConstraint(
            model_name="run",
            name="conversations_run_one_running",
        ),
        migrations.RemoveConstraint(
            model_name="run",
            name="conversations_run_status_valid",
        ),
        migrations.RemoveConstraint(
            model_name="toolcall",
            name="conversations_toolcall_status_valid",
        ),
        migrations.AddField(
            model_name="profile",
            name="approval",
            field=models.CharField(
                choices=[
                    ("default", "Default (defer to the less specific setting)"),
                    ("always", "Always (the conversation's owner decides)"),
                    ("staff", "Staff (a holder of conversations.approve_toolcall decides)"),
                    ("never", "Never"),
                ],
                default="default",
                help_text='Approval of tool calls for every tool of this profile; "default" defers to each tool.',
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="toolsetting",
            name="approval",
            field=models.CharField(
                choices=[
                    ("default", "Default (defer to the less specific setting)"),
                    ("always", "Always (the conversation's owner decides)"),
                    ("staff", "Staff (a holder of conversations.approve_toolcall decides)"),
                    ("never", "Never"),
                ],
                default="default",
                help_text='Approval of this tool\'s calls; "default" defers to its @tool declaration.',
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("running", "Running"),
                    ("completed", "Completed"),
                    ("max_iterations", "Stopped at max iterations"),
                    ("failed", "Failed"),
                    ("interrupted", "Interrupted"),
                    ("cancelled", "Cancelled"),
                    ("awaiting_approval", "Awaiting approval"),
                ],
                default="running",
                max_length=32,
            ),
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
                ],
                default="pending",
                max_length=32,
            ),
        ),
        migrations.AddConstraint(
            model_name="profile",
            constraint=models.CheckConstraint(
                condition=models.Q(("approval__in", ["default", "always", "staff", "never"])),
                name="conversations_profile_approval_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ("running", "awaiting_approval"))),
                fields=("conversation",),
                name="conversations_run_one_running",
                violation_error_message="Another run is already running on this conversation.",
            ),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "status__in",
                        [
                            "running",
                            "completed",
                            "max_iterations",
                            "failed",
                            "interrupted",
                            "cancelled",
                            "awaiting_approval",
                        ],
                    )
                ),
                name="conversations_run_status_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="toolcall",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "status__in",
                        [
                            "pending",
                            "running",
                            "succeeded",
                            "failed",
                            "rejected",
                            "interrupted",
                            "cancelled",
                            "awaiting_approval",
                        ],
                    )
                ),
                name="conversations_toolcall_status_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="toolsetting",
            constraint=models.CheckConstraint(
                condition=models.Q(("approval__in", ["default", "always", "staff", "never"])),
                name="conversations_toolsetting_approval_valid",
            ),
        ),
        migrations.AddField(
            model_name="toolapproval",
            name="decided_by",
            field=models.ForeignKey(
                blank=True,
                help_text="Empty on a decided approval: the system decided (timeout, cancellation).",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="toolapproval",
            name="run",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="approvals",
                to="conversations.run",
            ),
        ),
        migrations.AddField(
            model_name="toolapproval",
            name="tool_call",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="approval",
                to="conversations.toolcall",
            ),
        ),
        migrations.AddIndex(
            model_name="toolapproval",
            index=models.Index(
                fields=["decision", "requested_at"], name="conversations_approval_idx"
            ),
        ),
        migrations.AddConstraint(
            model_name="toolapproval",
            constraint=models.CheckConstraint(
                condition=models.Q(("level__in", ["owner", "staff"])),
                name="conversations_toolapproval_level_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="toolapproval",
            constraint=models.CheckConstraint(
                condition=models.Q(("decision__in", ["", "approved", "rejected"])),
                name="conversations_toolapproval_decision_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="toolapproval",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("decided_at__isnull", True), ("decided_by__isnull", True), ("decision", "")
                    ),
                    models.Q(
                        models.Q(("decision", ""), _negated=True), ("decided_at__isnull", False)
                    ),
                    _connector="OR",
                ),
                name="conversations_toolapproval_decided_at",
                violation_error_message="A decided approval has a time; a pending one has none.",
            ),
        ),
        migrations.AddConstraint(
            model_name="toolapproval",
            constraint=models.CheckConstraint(
                condition=models.Q(("decision", "rejected"), ("reason", ""), _connector="OR"),
                name="conversations_toolapproval_reason_on_rejection",
            ),
        ),
        migrations.AddConstraint(
            model_name="toolapproval",
            constraint=models.CheckConstraint(
                condition=django.db.models.lookups.Exact(
                    django.db.models.functions.text.Length("arguments_digest"), 64
                ),
                name="conversations_toolapproval_digest_sha256",
            ),
        ),
        migrations.RunPython(
            _sqlite_only(_triggers.create_triggers),
            _sqlite_only(_triggers.drop_triggers),
            elidable=False,
        ),
        migrations.RunPython(create_approval_triggers, drop_approval_triggers, elidable=False),
    ]
