"""A migrated database runs exactly the triggers and functions ``conversations.models.rules`` defines."""

from __future__ import annotations

import pytest
from django.db import connection

from conversations.models import rules

from .rules_db import differences, rule_installers

pytestmark = pytest.mark.django_db


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


def test_installing_a_rule_that_does_not_exist_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"^names: no \w+ rule is called conversations_nope$"):
        rules.install_rules(connection, search_config="simple", names=["conversations_nope"])


@pytest.mark.postgres
def test_the_search_document_is_not_installed_without_a_configuration():
    with pytest.raises(ValueError, match=r"^search_config: "):
        rules.install_rules(connection, names=["conversations_search_document"])

    assert differences() == []
