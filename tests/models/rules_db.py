"""What the database runs of the rules, and what their definitions would make it run.

SQLite keeps the text of each ``CREATE TRIGGER`` (``sqlite_master``), which
is compared with its definition. PostgreSQL keeps triggers parsed, and prints
them in its own form (``pg_get_triggerdef``, ``pg_get_functiondef``): there
the definitions are installed in a savepoint, in place of everything found,
and what PostgreSQL prints for them is compared with what it printed for the
installed ones. Both sides are compared as ``rules.normalised`` reads them
(layout and comments aside).
"""

from __future__ import annotations

import sys

from django.db import connection, transaction
from django.db.migrations.loader import MigrationLoader

from conversations.models import rules
from conversations.selectors.search import search_config

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
            f"trigger {rule.name}": rules.normalised(rules.rendered(rule.create[0]))
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
