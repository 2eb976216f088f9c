"""Branches, retention, and the full-text index of messages.

Conversations learn where they were forked from (``forked_from``,
``forked_at_position``, ``branch_root``; existing rows become their own
roots), profiles a retention period, and messages a full-text index kept by
the database (``conversations.services.transcript.search_index``: a GIN-indexed
``tsvector`` with triggers on PostgreSQL, an FTS5 table with triggers on
SQLite).

On SQLite only ``conversations_profile`` is rebuilt here (its new CHECK);
the conversation columns are plain ``ADD COLUMN``s, and
``conversations_message`` and ``conversations_toolcall`` are not altered, so
their rule triggers stay as they are.
"""

import django.db.models.deletion
from django.db import migrations, models


def _fill_branch_roots(apps, schema_editor):
    schema_editor.execute(
        "UPDATE conversations_conversation SET branch_root_id = id"
        " WHERE branch_root_id IS NULL AND forked_from_id IS NULL",
        params=None,
    )


def _install_search(apps, schema_editor):
    from conversations.services.transcript.search_index import install_search_index

    install_search_index(schema_editor.connection)


def _remove_search(apps, schema_editor):
    from conversations.services.transcript.search_index import remove_search_index

    remove_search_index(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ("conversations", "0008_usage_budgets"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="branch_root",
            field=models.ForeignKey(blank=True, help_text="The first conversation of the family (itself for a root).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="family", to="conversations.conversation"),
        ),
        migrations.AddField(
            model_name="conversation",
            name="forked_at_position",
            field=models.PositiveIntegerField(blank=True, help_text="The last position copied from the source; empty when nothing was copied. Kept when the source is deleted.", null=True),
        ),
        migrations.AddField(
            model_name="conversation",
            name="forked_from",
            field=models.ForeignKey(blank=True, help_text="The conversation this branch was copied from (empty for a root).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="forks", to="conversations.conversation"),
        ),
        migrations.AddField(
            model_name="profile",
            name="retention_days",
            field=models.PositiveIntegerField(blank=True, help_text="Conversations whose last message is older than this many days are purged by manage.py purge_conversations; empty = kept forever.", null=True),
        ),
        migrations.AddConstraint(
            model_name="profile",
            constraint=models.CheckConstraint(condition=models.Q(("retention_days__gte", 1)), name="conversations_profile_retention_days_positive"),
        ),
        migrations.RunPython(_fill_branch_roots, migrations.RunPython.noop, elidable=False),
        migrations.RunPython(_install_search, _remove_search, elidable=False),
    ]
