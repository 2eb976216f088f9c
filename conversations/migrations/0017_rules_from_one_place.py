"""Every trigger and trigger function installed again from ``conversations.models.rules``.

Their current SQL used to be spread over ``0002``, ``0004``, ``0007``,
``0009``, ``0014``, ``0015`` and ``0016`` (and ``services.search_index``);
it now lives in one place, ``conversations/models/rules/`` (one module per
dialect), which this migration installs: each rule is dropped and created
again, on PostgreSQL and SQLite alike. The SQL is what those migrations left
(up to its layout), so nothing changes in a database that had them all; the earlier
migrations keep their own SQL as the history of how it got there (docs/adr/0018).

A later migration that changes a rule edits its definition there, installs
it the same way, and records the new ``RULES_DIGEST``:
``tests/models/test_rule_definitions.py`` fails until the latest migration
that installs the rules carries the digest of the current definitions.

Going back does nothing: what this migration installs is what ``0016`` left.
"""

from django.db import migrations

RULES_DIGEST = "a1654bff34d2acf96f16bdcc7872206b6f0face008369e33756e041897210848"


def _install(apps, schema_editor):
    from conversations.models.rules import install_rules
    from conversations.selectors.search import search_config

    connection = schema_editor.connection
    config = search_config() if connection.vendor == "postgresql" else ""
    install_rules(connection, search_config=config)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0016_postgres_search_per_statement"),
    ]

    operations = [
        migrations.RunPython(_install, migrations.RunPython.noop, elidable=False),
    ]
