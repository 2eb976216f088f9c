"""The current SQL of every trigger and trigger function the app installs, and its installer.

The rules a single row can break are constraints on the models; the rules
that read other rows, and the upkeep of the message search index, are
triggers. Their current SQL lives here and nowhere else: one module per
dialect (:mod:`.postgresql`, :mod:`.sqlite`), one :class:`Rule` per trigger,
beside the models whose rows they guard. Migrations install it from here
(``0017_rules_from_one_place`` and every later one that changes a rule); the
SQL older migrations kept inline is the history of how a database got there.
``tests/models/test_rule_definitions.py`` checks that what a migrated
database runs equals these definitions, and that the latest migration that
installs them was written for them (:func:`digest`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.backends.base.base import BaseDatabaseWrapper

__all__ = [
    "AGENT_DEPTH_MARK",
    "SEARCH_CONFIG_MARK",
    "Rule",
    "digest",
    "drop_rules",
    "install_rules",
    "normalised",
    "rendered",
    "rules",
]

SEARCH_CONFIG_MARK = "{search_config}"
"""Stands for the text search configuration in the PostgreSQL SQL until it is installed."""

AGENT_DEPTH_MARK = "{max_agent_depth}"
"""Stands for ``CONVERSATIONS["MAX_AGENT_DEPTH"]`` (an integer) until a rule is installed."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One trigger and, on PostgreSQL, the function it runs (both named after the rule)."""

    name: str
    """``conversations_<model>_<rule>``: the trigger, its function and the constraint it reports."""
    table: str
    """The table the trigger is on; empty for a function no trigger runs (called by others)."""
    create: tuple[str, ...]
    """The statements that create it, in order: the function first, then the trigger."""
    search_index: bool = False
    """It keeps the message search index up to date rather than refusing rows."""


def rules(vendor: str) -> tuple[Rule, ...]:
    """Every rule of ``vendor`` (a connection's ``vendor``); none for a database the app does not guard."""
    # Imported here: the dialect modules build their rules from this module's ``Rule``.
    from . import postgresql, sqlite

    return {"postgresql": postgresql.RULES, "sqlite": sqlite.RULES}.get(vendor, ())


def install_rules(
    connection: BaseDatabaseWrapper, *, search_config: str = "", names: Iterable[str] | None = None
) -> None:
    """Drop and create the rules (all, or those ``names``) on ``connection``; idempotent.

    ``search_config`` is the PostgreSQL text search configuration the search
    document is computed with (``CONVERSATIONS["SEARCH_CONFIG"]``, checked by
    the caller); SQLite has none. The deepest chain of agents is
    ``CONVERSATIONS["MAX_AGENT_DEPTH"]`` as it is now. A rule whose table
    does not exist yet (an earlier migration installing today's rules) is
    left out: the migration that creates the table installs it.
    """
    tables = set(connection.introspection.table_names())
    chosen = tuple(
        rule for rule in _chosen(connection.vendor, names) if not rule.table or rule.table in tables
    )
    mark = f"'{SEARCH_CONFIG_MARK}'"
    if not search_config and any(mark in sql for rule in chosen for sql in rule.create):
        raise ValueError("search_config: the search document needs a text search configuration")
    drop_rules(connection, names=[rule.name for rule in chosen])
    with connection.cursor() as cursor:
        for rule in chosen:
            for sql in rule.create:
                cursor.execute(rendered(sql, search_config=search_config))


def rendered(sql: str, *, search_config: str = "") -> str:
    """``sql`` as it is installed: the marks replaced by the configuration's values.

    Raises :class:`ValueError` naming ``MAX_AGENT_DEPTH`` when that setting is
    not a positive integer.
    """
    if AGENT_DEPTH_MARK in sql:
        from conversations.conf import app_settings

        depth = app_settings().MAX_AGENT_DEPTH
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"MAX_AGENT_DEPTH: must be a positive integer, got {depth!r}")
        sql = sql.replace(AGENT_DEPTH_MARK, str(depth))
    literal = "'" + search_config.replace("'", "''") + "'"
    return sql.replace(f"'{SEARCH_CONFIG_MARK}'", literal)


def drop_rules(connection: BaseDatabaseWrapper, *, names: Iterable[str] | None = None) -> None:
    """Drop the rules (all, or those ``names``) from ``connection`` if they exist."""
    tables = set(connection.introspection.table_names())
    chosen = _chosen(connection.vendor, names)
    with connection.cursor() as cursor:
        # Every trigger before any function: a function cannot go while a trigger runs it.
        for rule in chosen:
            if connection.vendor == "postgresql" and rule.table in tables:
                cursor.execute(f"DROP TRIGGER IF EXISTS {rule.name} ON {rule.table}")
            elif connection.vendor == "sqlite":
                cursor.execute(f"DROP TRIGGER IF EXISTS {rule.name}")
        if connection.vendor == "postgresql":
            for rule in chosen:
                # Without an argument list: whatever its arguments were.
                cursor.execute(f"DROP FUNCTION IF EXISTS {rule.name}")


def _chosen(vendor: str, names: Iterable[str] | None) -> tuple[Rule, ...]:
    every = rules(vendor)
    if names is None:
        return every
    wanted = set(names)
    unknown = wanted - {rule.name for rule in every}
    if unknown:
        raise ValueError(f"names: no {vendor} rule is called {', '.join(sorted(unknown))}")
    return tuple(rule for rule in every if rule.name in wanted)


# A quoted string, a comment, a run of whitespace, or anything else (one character
# at a time where nothing longer matches, so no character is ever skipped).
_TOKEN = re.compile(r"'(?:[^']|'')*'|--[^\n]*|\s+|[^'\s-]+|.", re.DOTALL)


def normalised(sql: str) -> str:
    """``sql`` without comments and with its layout made canonical, for comparing definitions.

    Runs of whitespace become one space, none is kept just inside parentheses,
    and a final semicolon goes; quoted strings are kept exactly.
    """
    parts: list[str] = []
    for token in _TOKEN.findall(sql):
        if token.startswith("--"):
            continue
        if token.isspace():
            if parts and parts[-1] != " ":
                parts.append(" ")
            continue
        parts.append(token)
    text = "".join(parts).strip()
    # Only outside quotes: split on the quoted strings and keep them as they are.
    pieces = re.split(r"('(?:[^']|'')*')", text)
    for i in range(0, len(pieces), 2):
        pieces[i] = re.sub(r"\( ", "(", re.sub(r" \)", ")", pieces[i]))
    return "".join(pieces).rstrip("; ")


def digest() -> str:
    """A fingerprint of every definition of both dialects, as :func:`normalised` sees them.

    The latest migration that installs the rules records the digest it was
    written for; a test fails when the definitions change without a new one.
    """
    hashed = hashlib.sha256()
    for vendor in ("postgresql", "sqlite"):
        for rule in rules(vendor):
            parts = (vendor, rule.name, rule.table, str(rule.search_index), *rule.create)
            hashed.update("\0".join(normalised(part) for part in parts).encode() + b"\n")
    return hashed.hexdigest()
