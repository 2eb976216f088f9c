"""64-bit token counters, the largest provider answer read, JSON that loads at any depth.

Altering the counters rebuilds ``conversations_message`` on SQLite, which
would drop the rule triggers: they are dropped first and created again at the
end, from the SQL of the trigger migration (as 0006 does).
"""

from importlib import import_module

from django.db import migrations, models

import conversations.models.constraints

_triggers = import_module("conversations.migrations.0002_triggers")


def _sqlite_only(function):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            function(apps, schema_editor)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0006_message_is_error_languagemodel_sampling'),
    ]

    operations = [
        migrations.RunPython(
            _sqlite_only(_triggers.drop_triggers),
            _sqlite_only(_triggers.create_triggers),
            elidable=False,
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
            _sqlite_only(_triggers.create_triggers),
            _sqlite_only(_triggers.drop_triggers),
            elidable=False,
        ),
    ]
