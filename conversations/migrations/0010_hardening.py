"""64-bit token counters, the largest provider answer read, JSON that loads at any depth.

Altering the counters rebuilds ``conversations_message``, ``conversations_run``
and other tables on SQLite, which would trip (and then drop) the triggers on
and around them: the rule triggers, the approval rules and the search index.
So on SQLite every trigger of the app's tables is saved and dropped first, and
created again from its own SQL at the end. PostgreSQL alters in place.
"""

from django.db import migrations, models

import conversations.models.constraints

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


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0009_history'),
    ]

    operations = [
        migrations.RunPython(
            _drop_sqlite_triggers, _restore_sqlite_triggers, elidable=False
        ),
        migrations.AddField(
            model_name='provider',
            name='max_response_bytes',
            field=models.PositiveIntegerField(default=10485760, help_text='Largest answer read from the provider, in bytes; a bigger one fails the call (invalid_response).'),
        ),
        migrations.AlterField(
            model_name='message',
            name='cached_prompt_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='message',
            name='completion_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='message',
            name='prompt_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='message',
            name='reasoning_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='message',
            name='total_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='run',
            name='cached_prompt_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='run',
            name='completion_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='run',
            name='prompt_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='run',
            name='reasoning_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='run',
            name='total_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddConstraint(
            model_name='provider',
            constraint=models.CheckConstraint(condition=models.Q(('max_response_bytes__gt', 0)), name='conversations_provider_max_response_bytes_positive'),
        ),
        migrations.AlterField(
            model_name='conversation',
            name='metadata',
            field=models.JSONField(blank=True, decoder=conversations.models.constraints.DeepJSONDecoder, default=dict),
        ),
        migrations.AlterField(
            model_name='message',
            name='provider_metadata',
            field=models.JSONField(blank=True, decoder=conversations.models.constraints.DeepJSONDecoder, default=dict),
        ),
        migrations.AlterField(
            model_name='toolcall',
            name='arguments',
            field=models.JSONField(blank=True, decoder=conversations.models.constraints.DeepJSONDecoder, default=dict),
        ),
        migrations.RunPython(
            _restore_sqlite_triggers, _drop_sqlite_triggers, elidable=False
        ),
    ]
