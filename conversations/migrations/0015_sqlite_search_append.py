"""On SQLite the search index's call trigger stops re-reading every call of a message per call.

A turn's k calls are stored by one ``INSERT``; the trigger recomputed the
message's whole document once per call (k times, each reading all its
calls). Now each call appends its own words to its message's document. The
documents are the same, so nothing is reindexed. On PostgreSQL the triggers
are installed again as they were. Going back keeps the new triggers: they
keep the same index, and ``0009_history`` removes them with the rest.
"""

from django.db import migrations


def _install(apps, schema_editor):
    from conversations.services.transcript.search_index import install_search_triggers

    install_search_triggers(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0014_lean_round"),
    ]

    operations = [
        migrations.RunPython(_install, migrations.RunPython.noop, elidable=False),
    ]
