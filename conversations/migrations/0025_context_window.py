"""Context windows: message estimates, each call's view, strategies and their summaries.

``Message.token_estimate`` is filled for the messages stored before it
existed, from their text and calls as ``estimate_message_tokens`` counts
them (in batches). ``ContextSummary`` holds what the ``summarize`` strategy
sent in place of older turns. Adding NOT NULL columns rebuilds ``conversations_message``,
``conversations_modelcall`` and ``conversations_profile`` on SQLite, which
would trip (and then drop) the triggers on and around them; so every rule is
dropped first and installed again at the end from
``conversations.models.rules`` (docs/adr/0018). No rule changes here, so no
``RULES_DIGEST`` is recorded. PostgreSQL adds the columns in place and keeps
its rules.
"""

import json

import django.db.models.deletion
from django.db import migrations, models

_BATCH = 2000


def _drop_rules(apps, schema_editor):
    from conversations.models.rules import drop_rules

    if schema_editor.connection.vendor == "sqlite":
        drop_rules(schema_editor.connection)


def _install_rules(apps, schema_editor):
    from conversations.models.rules import install_rules

    if schema_editor.connection.vendor == "sqlite":
        install_rules(schema_editor.connection)


def _estimate_stored(apps, schema_editor):
    from conversations.domain.context import MESSAGE_OVERHEAD_TOKENS
    from conversations.domain.estimates import estimate_tokens

    Message = apps.get_model("conversations", "Message")
    ToolCall = apps.get_model("conversations", "ToolCall")
    alias = schema_editor.connection.alias
    last = 0
    while True:
        batch = list(
            Message.objects.using(alias)
            .filter(pk__gt=last)
            .order_by("pk")
            .select_related("tool_call")[:_BATCH]
        )
        if not batch:
            return
        last = batch[-1].pk
        calls = {}
        for call in ToolCall.objects.using(alias).filter(message__in=batch).order_by("index"):
            calls.setdefault(call.message_id, []).append(call)
        for row in batch:
            text = row.content
            for call in calls.get(row.pk, ()):
                arguments = call.raw_arguments
                if arguments is None:
                    arguments = json.dumps(
                        call.arguments, separators=(",", ":"), ensure_ascii=False
                    )
                text += call.call_id + call.name + arguments
            if row.tool_call is not None:
                text += row.tool_call.call_id
            row.token_estimate = estimate_tokens(text) + MESSAGE_OVERHEAD_TOKENS
        Message.objects.using(alias).bulk_update(batch, ["token_estimate"])


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0024_agents'),
    ]

    operations = [
        migrations.RunPython(_drop_rules, _install_rules, elidable=False),
        migrations.AddField(
            model_name='message',
            name='token_estimate',
            field=models.PositiveIntegerField(default=0, help_text="About how many tokens the message is on the wire, estimated offline when it was stored (what choosing a context window's view reads; docs/context.md)."),
        ),
        migrations.AddField(
            model_name='modelcall',
            name='first_position',
            field=models.PositiveIntegerField(blank=True, help_text='The position of the first stored message the call sent (what came before was left out to fit the context window); empty: it sent no stored message.', null=True),
        ),
        migrations.AddField(
            model_name='profile',
            name='context_strategy',
            field=models.CharField(choices=[('truncate', 'Send the newest whole turns'), ('summarize', 'Send a summary of the older turns, then the newest'), ('fail', 'End the run context_too_large')], default='truncate', help_text='When the history outgrows the model\'s context window: send the newest whole turns ("truncate"), a summary of the older ones before them ("summarize", written by the summary profile) or end the run context_too_large ("fail"). The stored history never changes (docs/context.md).', max_length=16),
        ),
        migrations.AddField(
            model_name='profile',
            name='summary_profile',
            field=models.ForeignKey(blank=True, help_text='The profile that writes summaries for the "summarize" strategy (a small, cheap model will do); empty: this profile\'s own.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='conversations.profile'),
        ),
        migrations.CreateModel(
            name='ContextSummary',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('first_position', models.PositiveIntegerField(default=0)),
                ('last_position', models.PositiveIntegerField(help_text='The last stored position the summary covers (the view starts after it).')),
                ('content', models.TextField()),
                ('model', models.CharField(blank=True, max_length=200)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='context_summaries', to='conversations.conversation')),
                ('model_call', models.OneToOneField(blank=True, help_text='The ledger row of the call that wrote it (its tokens and cost).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='summary_made', to='conversations.modelcall')),
                ('profile', models.ForeignKey(blank=True, help_text="The profile that wrote it (the run's profile's summary_profile).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='context_summaries', to='conversations.profile')),
            ],
            options={
                'verbose_name_plural': 'context summaries',
                'ordering': ['conversation', '-last_position'],
            },
        ),
        migrations.AddField(
            model_name='modelcall',
            name='context_summary',
            field=models.ForeignKey(blank=True, help_text='The summary sent in place of the messages before first_position, if any.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='conversations.contextsummary'),
        ),
        migrations.AddIndex(
            model_name='contextsummary',
            index=models.Index(fields=['conversation', '-last_position'], name='conversations_csummary_idx'),
        ),
        migrations.AddConstraint(
            model_name='contextsummary',
            constraint=models.CheckConstraint(condition=models.Q(('first_position__lte', models.F('last_position'))), name='conversations_contextsummary_covers_a_range'),
        ),
    
        migrations.RunPython(_estimate_stored, migrations.RunPython.noop, elidable=False),
        migrations.RunPython(_install_rules, _drop_rules, elidable=False),
    ]
