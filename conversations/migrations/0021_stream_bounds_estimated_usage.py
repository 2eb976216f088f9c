"""Streams get a total bound; usage rows, messages and runs say when tokens are estimated.

Adding a NOT NULL column (and the provider's check constraint) rebuilds
``conversations_message``, ``conversations_modelcall``,
``conversations_provider`` and ``conversations_run`` on SQLite, which would
trip (and then drop) the triggers on and around them; so every rule is
dropped first and installed again at the end from
``conversations.models.rules`` (docs/adr/0018). No rule changes here, so
this migration records no ``RULES_DIGEST``: ``0019`` stays the latest one
written for the current definitions. PostgreSQL adds the columns in place
and keeps its rules.
"""

from django.db import migrations, models


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
        ('conversations', '0020_structured_output'),
    ]

    operations = [
        migrations.RunPython(_drop_rules, _install_rules, elidable=False),
        migrations.AddField(
            model_name='message',
            name='usage_estimated',
            field=models.BooleanField(default=False, help_text='The token counts are an estimate (the provider reported none).'),
        ),
        migrations.AddField(
            model_name='modelcall',
            name='estimated',
            field=models.BooleanField(default=False, help_text='The tokens are an estimate from the text: the provider reported none (the answer was stopped, cut at a deadline or broke off).'),
        ),
        migrations.AddField(
            model_name='provider',
            name='max_stream_seconds',
            field=models.FloatField(default=600.0, help_text='Longest a streamed answer may last, in seconds; a longer one is cut (provider_timeout) and what arrived is kept.'),
        ),
        migrations.AddField(
            model_name='run',
            name='estimated_calls',
            field=models.PositiveIntegerField(default=0, help_text='Model calls of the run whose tokens are an estimate.'),
        ),
        migrations.AddConstraint(
            model_name='provider',
            constraint=models.CheckConstraint(condition=models.Q(('max_stream_seconds__gt', 0)), name='conversations_provider_max_stream_seconds_positive'),
        ),
        migrations.RunPython(_install_rules, _drop_rules, elidable=False),
    ]
