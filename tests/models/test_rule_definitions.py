"""A migrated database runs exactly the triggers and functions ``conversations.models.rules`` defines.

SQLite keeps the text of each ``CREATE TRIGGER`` (``sqlite_master``), which
is compared with its definition. PostgreSQL keeps triggers parsed, and prints
them in its own form (``pg_get_triggerdef``, ``pg_get_functiondef``): there
the definitions are installed in a savepoint, in place of everything found,
and what PostgreSQL prints for them is compared with what it printed for the
migrated ones. Both sides are compared as ``rules.normalised`` reads them
(layout and comments aside).
"""

from __future__ import annotations

import sys

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.migrations.loader import MigrationLoader

from conversations.models import rules
from conversations.selectors.search import search_config

pytestmark = pytest.mark.django_db

_APP = "conversations\\_%"


def installed() -> dict[str, str]:
    """Every trigger and function of the app in the database, by kind and name, normalised."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
                " AND (name LIKE %s ESCAPE '\\' OR tbl_name LIKE %s ESCAPE '\\')",
                [_APP, _APP],
            )
            return {f"trigger {name}": rules.normalised(sql) for name, sql in cursor.fetchall()}
        cursor.execute(
            "SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t"
            " JOIN pg_class c ON c.oid = t.tgrelid"
            " WHERE NOT t.tgisinternal AND (t.tgname LIKE %s OR c.relname LIKE %s)",
            [_APP, _APP],
        )
        found = {f"trigger {name}": rules.normalised(sql) for name, sql in cursor.fetchall()}
        cursor.execute(
            "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p"
            " WHERE p.proname LIKE %s AND p.pronamespace = current_schema()::regnamespace",
            [_APP],
        )
        found.update((f"function {name}", rules.normalised(sql)) for name, sql in cursor.fetchall())
        return found


def defined() -> dict[str, str]:
    """The same for the definitions of the connection's dialect."""
    if connection.vendor == "sqlite":
        return {
            f"trigger {rule.name}": rules.normalised(rule.create[0])
            for rule in rules.rules("sqlite")
        }
    with transaction.atomic(), connection.cursor() as cursor:
        # Everything found goes (in a savepoint), so only the definitions are printed.
        cursor.execute(
            "SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " WHERE NOT t.tgisinternal AND (t.tgname LIKE %s OR c.relname LIKE %s)",
            [_APP, _APP],
        )
        for name, table in cursor.fetchall():
            cursor.execute(f"DROP TRIGGER {name} ON {table}")
        for key in installed():
            cursor.execute(f"DROP FUNCTION {key.removeprefix('function ')}")
        rules.install_rules(connection, search_config=search_config())
        found = installed()
        transaction.set_rollback(True)
    return found


def differences() -> list[tuple[str, str, str]]:
    """What sets the database apart from the definitions: (verdict, rule, where they part)."""
    actual, wanted = installed(), defined()
    problems = [("missing", key, "") for key in sorted(wanted.keys() - actual.keys())]
    problems += [("not defined", key, "") for key in sorted(actual.keys() - wanted.keys())]
    problems += [
        ("differs", key, _where_they_part(actual[key], wanted[key]))
        for key in sorted(actual.keys() & wanted.keys())
        if actual[key] != wanted[key]
    ]
    return problems


def _where_they_part(installed: str, defined: str) -> str:
    pairs = zip(installed, defined, strict=False)
    at = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(installed), len(defined)))
    start = max(at - 60, 0)
    return (
        f"\n  installed: ...{installed[start : at + 80]}"
        f"\n  defined:   ...{defined[start : at + 80]}"
    )


def test_the_database_runs_the_defined_rules_and_no_others():
    problems = differences()
    assert not problems, "\n".join(f"{verdict}: {key}{detail}" for verdict, key, detail in problems)


def test_a_missing_an_extra_and_a_changed_rule_are_told_apart():
    on = " ON conversations_{}" if connection.vendor == "postgresql" else ""
    changed = next(r for r in rules.rules(connection.vendor) if r.name.endswith("call_immutable"))
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER conversations_message_immutable" + on.format("message"))
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION conversations_message_extra() RETURNS trigger LANGUAGE plpgsql"
                " AS $$ BEGIN RETURN OLD; END $$"
            )
        cursor.execute(
            "CREATE TRIGGER conversations_message_extra BEFORE DELETE ON conversations_message"
            + (
                " FOR EACH ROW EXECUTE FUNCTION conversations_message_extra()"
                if connection.vendor == "postgresql"
                else " BEGIN SELECT 1; END"
            )
        )
        cursor.execute(f"DROP TRIGGER {changed.name}" + on.format("toolcall"))
        for sql in changed.create:
            cursor.execute(sql.replace("cannot change", "must stay"))

    found = {(verdict, key) for verdict, key, _detail in differences()}

    expected = {
        ("missing", "trigger conversations_message_immutable"),
        ("not defined", "trigger conversations_message_extra"),
    }
    if connection.vendor == "sqlite":
        expected.add(("differs", "trigger conversations_toolcall_immutable"))
    else:
        expected |= {
            ("not defined", "function conversations_message_extra"),
            ("differs", "function conversations_toolcall_immutable"),
        }
    assert found == expected


def rule_installers() -> list[tuple[str, str, str]]:
    """The migrations that install the rules, in order: (the one before it, its name, its digest)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    (leaf,) = loader.graph.leaf_nodes("conversations")
    found = []
    for key in loader.graph.forwards_plan(leaf):
        migration = loader.graph.nodes[key]
        digest = getattr(sys.modules[type(migration).__module__], "RULES_DIGEST", None)
        if key[0] == "conversations" and digest is not None:
            (previous,) = (name for app, name in migration.dependencies if app == "conversations")
            found.append((previous, key[1], digest))
    return found


def test_the_latest_migration_that_installs_the_rules_was_written_for_these_definitions():
    installers = rule_installers()
    assert installers, "no migration installs the rules from conversations.models.rules"
    _previous, name, digest = installers[-1]
    assert digest == rules.digest(), (
        f"the rule definitions changed after {name}: add a migration that installs them"
        f" (as that one does) with RULES_DIGEST = {rules.digest()!r}"
    )


def test_each_definition_creates_what_it_is_called():
    for vendor in ("postgresql", "sqlite"):
        names = [rule.name for rule in rules.rules(vendor)]
        assert len(names) == len(set(names)), vendor
        for rule in rules.rules(vendor):
            text = " ".join(rules.normalised(sql) for sql in rule.create)
            if rule.table:
                assert f"TRIGGER {rule.name} " in text, rule.name
                assert f" ON {rule.table} " in text, rule.name
            if vendor == "postgresql":
                assert f"CREATE OR REPLACE FUNCTION {rule.name}(" in text, rule.name


@pytest.mark.django_db(transaction=True)
def test_the_first_migration_from_the_definitions_installs_what_the_ones_before_it_left():
    """The definitions gathered the SQL of the earlier migrations unchanged: it goes back as a no-op."""
    previous, first, digest = rule_installers()[0]
    if digest != rules.digest():
        pytest.skip(f"a later migration changed the rules: {first} no longer installs them as is")
    try:
        call_command("migrate", "conversations", "zero", verbosity=0)
        call_command("migrate", "conversations", previous, verbosity=0)
        before = installed()
        call_command("migrate", "conversations", first, verbosity=0)
        assert installed() == before
    finally:
        call_command("migrate", "conversations", verbosity=0)


def test_normalising_drops_layout_and_comments_but_keeps_quoted_text():
    written = """
        CREATE TRIGGER t -- why it exists
        WHEN ( NEW.a IN ('x  y', 'it''s -- no comment') )
        BEGIN SELECT 1; END;
    """

    assert rules.normalised(written) == (
        "CREATE TRIGGER t WHEN (NEW.a IN ('x  y', 'it''s -- no comment')) BEGIN SELECT 1; END"
    )
    assert rules.normalised("a - b --c\n'unclosed") == "a - b 'unclosed"
