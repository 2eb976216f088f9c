"""Sub-agents: Profile.agents and agent_timeout, child conversations and runs, root_run on the ledger.

``Profile.agents`` (the table ``conversations_profile_agents``) gets the rules
``conversations_profile_agents_*``: no cycle, no chain longer than
``MAX_AGENT_DEPTH``, edges never change (docs/adr/0024). Adding columns
rebuilds ``conversations_conversation``, ``conversations_modelcall``,
``conversations_profile`` and ``conversations_run`` on SQLite, which would
trip the triggers on and around them: every rule is dropped first there, and
every rule is installed again at the end from ``conversations.models.rules``
on both databases, with the ``RULES_DIGEST`` of these definitions.
"""

import django.db.models.deletion
from django.db import migrations, models

RULES_DIGEST = "d1c41432ff468e90aba20a4ac253031b42145d32f49c63fcedab274565cf13aa"


def _drop_rules(apps, schema_editor):
    from conversations.models.rules import drop_rules

    if schema_editor.connection.vendor == "sqlite":
        drop_rules(schema_editor.connection)


def _install_rules(apps, schema_editor):
    from conversations.models.rules import install_rules
    from conversations.selectors.search import search_config

    connection = schema_editor.connection
    config = search_config() if connection.vendor == "postgresql" else ""
    install_rules(connection, search_config=config)


def _previous_rules(apps, schema_editor):
    from conversations.models.rules import drop_rules, rules

    # Going back: the agent rules go (their functions too, which dropping the
    # table would leave); on SQLite every rule, as the tables are rebuilt.
    connection = schema_editor.connection
    edges = [r.name for r in rules(connection.vendor) if r.table == "conversations_profile_agents"]
    drop_rules(connection, names=None if connection.vendor == "sqlite" else edges)


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0023_feedback_scores_evaluations'),
    ]

    operations = [
        migrations.RunPython(_drop_rules, _install_rules, elidable=False),
        migrations.AddField(
            model_name='conversation',
            name='parent_tool_call',
            field=models.ForeignKey(blank=True, help_text="The agent call of another conversation this one answers (a sub-agent's conversation, kept out of its owner's list); empty for a conversation of its own.", null=True, on_delete=django.db.models.deletion.CASCADE, related_name='agent_conversations', to='conversations.toolcall'),
        ),
        migrations.AddField(
            model_name='modelcall',
            name='root_run',
            field=models.ForeignKey(blank=True, help_text="The first run of the chain of agent calls the call was made in (its own run when no agent call started it): a run's total is the sum of the rows under it.", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='tree_model_calls', to='conversations.run'),
        ),
        migrations.AddField(
            model_name='profile',
            name='description',
            field=models.TextField(blank=True, help_text='What this profile does, in a sentence or two: the description of its tool agent_<slug> when another profile may call it.'),
        ),
        migrations.AddField(
            model_name='profile',
            name='agent_timeout',
            field=models.FloatField(default=300.0, help_text="Seconds a run of this profile may take when another profile calls it as an agent; a longer one is cancelled and the caller's call answered timed out."),
        ),
        migrations.AddField(
            model_name='profile',
            name='agents',
            field=models.ManyToManyField(blank=True, help_text='Profiles this profile may hand a task to: each is offered to the model as the tool agent_<slug>. No cycle, and no chain deeper than MAX_AGENT_DEPTH.', related_name='callers', to='conversations.profile'),
        ),
        migrations.AddField(
            model_name='run',
            name='parent_run',
            field=models.ForeignKey(blank=True, help_text="The run whose agent call started this one (a sub-agent's run).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='children', to='conversations.run'),
        ),
        migrations.AddField(
            model_name='run',
            name='root_run',
            field=models.ForeignKey(blank=True, help_text='The first run of the chain of agent calls this run belongs to; empty for a run no agent call started.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='descendants', to='conversations.run'),
        ),
        migrations.AddConstraint(
            model_name='profile',
            constraint=models.CheckConstraint(condition=models.Q(('agent_timeout__gt', 0)), name='conversations_profile_agent_timeout_positive'),
        ),
        migrations.RunPython(_install_rules, _previous_rules, elidable=False),
    ]
