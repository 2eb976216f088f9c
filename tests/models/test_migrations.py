"""Migrations: models and migrations agree, triggers are installed, rollback works."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from conversations.models import rules
from conversations.services.transcript.search_index import (
    POSTGRES_SEARCH_FUNCTIONS,
    POSTGRES_SEARCH_TRIGGERS,
    SQLITE_SEARCH_TRIGGERS,
)

from . import rules_db

RULE_TRIGGERS = {
    "conversations_attachment_immutable",
    "conversations_messageattachment_immutable",
    "conversations_messageattachment_same_owner",
    "conversations_message_answer_kept",
    "conversations_message_answer_pairing",
    "conversations_message_immutable",
    "conversations_message_no_orphans",
    "conversations_toolapproval_decision_final",
    "conversations_toolcall_approval_required",
    "conversations_toolcall_assistant_message",
    "conversations_toolcall_conversation_match",
    "conversations_toolcall_immutable",
    "conversations_toolcall_no_orphans",
}
AGENT_TRIGGERS = {
    "conversations_profile_agents_acyclic",
    "conversations_profile_agents_depth",
    "conversations_profile_agents_immutable",
}
POSTGRES_TRIGGERS = RULE_TRIGGERS | AGENT_TRIGGERS | set(POSTGRES_SEARCH_TRIGGERS)
SQLITE_TRIGGERS = (
    RULE_TRIGGERS - {"conversations_message_answer_kept"}
    | AGENT_TRIGGERS
    | set(SQLITE_SEARCH_TRIGGERS)
)


def installed_triggers() -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname LIKE %s",
                ["conversations\\_%"],
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE %s",
                ["conversations_%"],
            )
        return {row[0] for row in cursor.fetchall()}


def installed_functions() -> set[str]:
    if connection.vendor != "postgresql":
        return set()
    with connection.cursor() as cursor:
        cursor.execute("SELECT proname FROM pg_proc WHERE proname LIKE %s", ["conversations\\_%"])
        return {row[0] for row in cursor.fetchall()}


def expected_triggers() -> set[str]:
    return POSTGRES_TRIGGERS if connection.vendor == "postgresql" else SQLITE_TRIGGERS


def test_models_and_migrations_agree(db):
    call_command("makemigrations", "conversations", "--check", "--dry-run", verbosity=0)


def test_every_trigger_is_installed(db):
    # On SQLite a later migration that rebuilds a table drops its triggers: this notices.
    assert installed_triggers() == expected_triggers()
    if connection.vendor == "postgresql":
        assert installed_functions() == (
            RULE_TRIGGERS | AGENT_TRIGGERS | set(POSTGRES_SEARCH_FUNCTIONS)
        )


@pytest.mark.django_db(transaction=True)
def test_migrating_to_zero_and_back():
    previous, first, digest = rules_db.rule_installers()[0]
    call_command("migrate", "conversations", "zero", verbosity=0)
    try:
        assert installed_triggers() == set()
        assert installed_functions() == set()
        assert "conversations_message" not in connection.introspection.table_names()
        call_command("migrate", "conversations", previous, verbosity=0)
        left_by_history = rules_db.installed()
    finally:
        call_command("migrate", "conversations", verbosity=0)
    assert installed_triggers() == expected_triggers()
    assert "conversations_message" in connection.introspection.table_names()
    # The first migration that installs the rules from their definitions installs
    # what the migrations before it left (so it goes back as a no-op), as long as
    # no later one changed a definition.
    if digest == rules.digest():
        assert rules_db.installed() == left_by_history, f"{first} changed a rule"


def test_the_search_index_can_be_installed_again_after_a_rebuild_dropped_it(db):
    from conversations.domain import ChatMessage
    from conversations.models import Conversation
    from conversations.services.transcript.messages import append_messages
    from conversations.services.transcript.search_index import install_search_index

    conversation = Conversation.objects.create(owner=_user(), title="t")
    with connection.cursor() as cursor:
        for name in SQLITE_SEARCH_TRIGGERS if connection.vendor == "sqlite" else ():
            cursor.execute(f"DROP TRIGGER {name}")
    install_search_index(connection)
    assert installed_triggers() == expected_triggers()
    append_messages(conversation=conversation, messages=[ChatMessage.user("porphyry")])
    from conversations.selectors.search import search_messages

    assert search_messages(query="porphyry", user=None).count() == 1


def _user():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username="search-index")
