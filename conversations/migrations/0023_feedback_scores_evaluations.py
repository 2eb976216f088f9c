"""Feedback, scores and evaluations; a conversation's kind, evaluation and redaction time.

New tables ``conversations_feedback``, ``conversations_score`` and
``conversations_evaluation``, each with its one-row checks (exactly one
target; exactly one value). Adding NOT NULL columns and check constraints to
``conversations_conversation`` rebuilds it on SQLite, which would trip (and
then drop) the triggers on and around it; so every rule is dropped first and
installed again at the end from ``conversations.models.rules`` (docs/adr/0018).
No rule changes here, so this migration records no ``RULES_DIGEST``.
PostgreSQL adds the columns in place and keeps its rules.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import conversations.models.constraints


def _drop_rules(apps, schema_editor):
    from conversations.models.rules import drop_rules

    if schema_editor.connection.vendor == "sqlite":
        drop_rules(schema_editor.connection)


def _install_rules(apps, schema_editor):
    from conversations.models.rules import install_rules

    if schema_editor.connection.vendor == "sqlite":
        install_rules(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0022_provider_tools_and_citations"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(_drop_rules, _install_rules, elidable=False),
        migrations.CreateModel(
            name="Feedback",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("value", models.SmallIntegerField(help_text="+1 (up) or -1 (down).")),
                ("comment", models.TextField(blank=True)),
                (
                    "tags",
                    models.JSONField(
                        blank=True,
                        decoder=conversations.models.constraints.DeepJSONDecoder,
                        default=list,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name_plural": "feedback",
                "ordering": ["-updated_at"],
            },
        ),
        migrations.CreateModel(
            name="Score",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                ("value_number", models.FloatField(blank=True, null=True)),
                ("value_bool", models.BooleanField(blank=True, null=True)),
                ("value_label", models.CharField(blank=True, max_length=100, null=True)),
                (
                    "source",
                    models.CharField(
                        choices=[("user", "User"), ("evaluator", "Evaluator"), ("admin", "Admin")],
                        max_length=16,
                    ),
                ),
                ("comment", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["created_at", "pk"],
            },
        ),
        migrations.AddField(
            model_name="conversation",
            name="kind",
            field=models.CharField(
                choices=[("chat", "Chat"), ("evaluation", "Evaluation")],
                default="chat",
                help_text="An evaluation's replays are hidden from the user's list and from exports.",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="conversation",
            name="redacted_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When its contents were replaced by the redaction marker (never exported).",
                null=True,
            ),
        ),
        migrations.CreateModel(
            name="Evaluation",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "profiles",
                    models.JSONField(
                        decoder=conversations.models.constraints.DeepJSONDecoder,
                        default=list,
                        help_text="The slugs of the profiles compared.",
                    ),
                ),
                (
                    "scorers",
                    models.JSONField(
                        decoder=conversations.models.constraints.DeepJSONDecoder,
                        default=list,
                        help_text="The names of the scorers run.",
                    ),
                ),
                (
                    "dataset",
                    models.CharField(
                        blank=True, help_text="The dataset's file name.", max_length=255
                    ),
                ),
                (
                    "dataset_sha256",
                    models.CharField(help_text="sha256 of the dataset's bytes.", max_length=64),
                ),
                ("examples", models.PositiveIntegerField(default=0)),
                ("started_at", models.DateTimeField(auto_now_add=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "totals",
                    models.JSONField(
                        blank=True,
                        decoder=conversations.models.constraints.DeepJSONDecoder,
                        default=dict,
                        help_text="Per profile: runs, failures, mean per scorer, cost, latency p50 and p95.",
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="llm_evaluations",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-started_at"],
            },
        ),
        migrations.AddField(
            model_name="conversation",
            name="evaluation",
            field=models.ForeignKey(
                blank=True,
                help_text="The evaluation this conversation replays an example of.",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="conversations",
                to="conversations.evaluation",
            ),
        ),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.CheckConstraint(
                condition=models.Q(("kind__in", ["chat", "evaluation"])),
                name="conversations_conversation_kind_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("evaluation__isnull", True), ("kind", "evaluation"), _connector="OR"
                ),
                name="conversations_conversation_evaluation_kind",
                violation_error_message="Only an evaluation conversation belongs to an evaluation.",
            ),
        ),
        migrations.AddField(
            model_name="feedback",
            name="message",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="feedback",
                to="conversations.message",
            ),
        ),
        migrations.AddField(
            model_name="feedback",
            name="run",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="feedback",
                to="conversations.run",
            ),
        ),
        migrations.AddField(
            model_name="feedback",
            name="tool_call",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="feedback",
                to="conversations.toolcall",
            ),
        ),
        migrations.AddField(
            model_name="feedback",
            name="user",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="llm_feedback",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="score",
            name="created_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="llm_scores",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="score",
            name="evaluation",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="scores",
                to="conversations.evaluation",
            ),
        ),
        migrations.AddField(
            model_name="score",
            name="message",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="scores",
                to="conversations.message",
            ),
        ),
        migrations.AddField(
            model_name="score",
            name="run",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="scores",
                to="conversations.run",
            ),
        ),
        migrations.AddConstraint(
            model_name="evaluation",
            constraint=models.CheckConstraint(
                condition=django.db.models.lookups.Exact(
                    conversations.models.JSONTypeOf("profiles"), "array"
                ),
                name="conversations_evaluation_profiles_array",
            ),
        ),
        migrations.AddConstraint(
            model_name="evaluation",
            constraint=models.CheckConstraint(
                condition=django.db.models.lookups.Exact(
                    conversations.models.JSONTypeOf("totals"), "object"
                ),
                name="conversations_evaluation_totals_object",
            ),
        ),
        migrations.AddConstraint(
            model_name="evaluation",
            constraint=models.CheckConstraint(
                condition=models.Q(("dataset_sha256__regex", "^[0-9a-f]{64}$")),
                name="conversations_evaluation_sha256_hex",
            ),
        ),
        migrations.AddIndex(
            model_name="feedback",
            index=models.Index(fields=["updated_at"], name="conversations_feedback_time"),
        ),
        migrations.AddConstraint(
            model_name="feedback",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("pk__in", []),
                    models.Q(
                        ("message__isnull", False),
                        ("tool_call__isnull", True),
                        ("run__isnull", True),
                    ),
                    models.Q(
                        ("tool_call__isnull", False),
                        ("message__isnull", True),
                        ("run__isnull", True),
                    ),
                    models.Q(
                        ("run__isnull", False),
                        ("message__isnull", True),
                        ("tool_call__isnull", True),
                    ),
                    _connector="OR",
                ),
                name="conversations_feedback_one_target",
                violation_error_message="Feedback judges exactly one message, tool call or run.",
            ),
        ),
        migrations.AddConstraint(
            model_name="feedback",
            constraint=models.CheckConstraint(
                condition=models.Q(("value__in", [1, -1])), name="conversations_feedback_value_sign"
            ),
        ),
        migrations.AddConstraint(
            model_name="feedback",
            constraint=models.CheckConstraint(
                condition=django.db.models.lookups.Exact(
                    conversations.models.JSONTypeOf("tags"), "array"
                ),
                name="conversations_feedback_tags_array",
            ),
        ),
        migrations.AddConstraint(
            model_name="feedback",
            constraint=models.UniqueConstraint(
                condition=models.Q(("message__isnull", False)),
                fields=("user", "message"),
                name="conversations_feedback_one_per_message",
            ),
        ),
        migrations.AddConstraint(
            model_name="feedback",
            constraint=models.UniqueConstraint(
                condition=models.Q(("tool_call__isnull", False)),
                fields=("user", "tool_call"),
                name="conversations_feedback_one_per_tool_call",
            ),
        ),
        migrations.AddConstraint(
            model_name="feedback",
            constraint=models.UniqueConstraint(
                condition=models.Q(("run__isnull", False)),
                fields=("user", "run"),
                name="conversations_feedback_one_per_run",
            ),
        ),
        migrations.AddConstraint(
            model_name="score",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("pk__in", []),
                    models.Q(("message__isnull", False), ("run__isnull", True)),
                    models.Q(("run__isnull", False), ("message__isnull", True)),
                    _connector="OR",
                ),
                name="conversations_score_one_target",
                violation_error_message="A score judges exactly one run or message.",
            ),
        ),
        migrations.AddConstraint(
            model_name="score",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("pk__in", []),
                    models.Q(
                        ("value_number__isnull", False),
                        ("value_bool__isnull", True),
                        ("value_label__isnull", True),
                    ),
                    models.Q(
                        ("value_bool__isnull", False),
                        ("value_number__isnull", True),
                        ("value_label__isnull", True),
                    ),
                    models.Q(
                        ("value_label__isnull", False),
                        ("value_number__isnull", True),
                        ("value_bool__isnull", True),
                    ),
                    _connector="OR",
                ),
                name="conversations_score_one_value",
                violation_error_message="A score has exactly one value: a number, a boolean or a label.",
            ),
        ),
        migrations.AddConstraint(
            model_name="score",
            constraint=models.CheckConstraint(
                condition=models.Q(("name", ""), _negated=True),
                name="conversations_score_name_not_empty",
            ),
        ),
        migrations.AddConstraint(
            model_name="score",
            constraint=models.CheckConstraint(
                condition=models.Q(("source__in", ["user", "evaluator", "admin"])),
                name="conversations_score_source_valid",
            ),
        ),
        migrations.RunPython(_install_rules, _drop_rules, elidable=False),
    ]
