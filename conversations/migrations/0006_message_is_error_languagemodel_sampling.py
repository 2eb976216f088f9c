"""Tool results flagged as errors, and the sampling parameters a model accepts.

On SQLite, adding a column with a CHECK rebuilds ``conversations_message``
and the rebuild would trip (and then drop) the rule triggers, so they are
dropped first and created again at the end, from the SQL of the trigger
migration. PostgreSQL alters in place and keeps its triggers.
"""

from importlib import import_module

import django.db.models.lookups
from django.db import migrations, models

import conversations.models

_triggers = import_module("conversations.migrations.0002_triggers")


def _sqlite_only(function):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            function(apps, schema_editor)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0005_toolcall_name_index'),
    ]

    operations = [
        migrations.RunPython(
            _sqlite_only(_triggers.drop_triggers),
            _sqlite_only(_triggers.create_triggers),
            elidable=False,
        ),
        migrations.AddField(
            model_name='languagemodel',
            name='sampling_parameters',
            field=models.JSONField(blank=True, help_text='The sampling parameters this model accepts, as a list of names (e.g. ["temperature"]); empty = the adapter\'s default (see docs/providers.md). Parameters the model does not accept are never sent.', null=True),
        ),
        migrations.AddField(
            model_name='message',
            name='is_error',
            field=models.BooleanField(default=False, help_text='A tool result that reports a failure (flagged to providers).'),
        ),
        migrations.AddConstraint(
            model_name='languagemodel',
            constraint=models.CheckConstraint(condition=models.Q(('sampling_parameters__isnull', True), django.db.models.lookups.Exact(conversations.models.JSONTypeOf('sampling_parameters'), 'array'), _connector='OR'), name='conversations_languagemodel_sampling_parameters_array'),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.CheckConstraint(condition=models.Q(('is_error', False), ('role', 'tool'), _connector='OR'), name='conversations_message_is_error_only_tool', violation_error_message='Only a tool message can report an error.'),
        ),
        migrations.RunPython(
            _sqlite_only(_triggers.create_triggers),
            _sqlite_only(_triggers.drop_triggers),
            elidable=False,
        ),
    ]
