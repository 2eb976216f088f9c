"""Erasure leaves none of a user's text anywhere: a marker planted everywhere, the whole database scanned."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from conversations.domain import Usage
from conversations.models import (
    Conversation,
    MCPCall,
    Message,
    Run,
    ToolApproval,
    ToolCall,
)
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop
from conversations.services.history.retention import erase_user

pytestmark = pytest.mark.django_db

MARK = "zqxjvwmark"
"""Planted in every text a user can fill; no word of any language, so any hit is a leak."""


def _scan() -> set[tuple[str, str]]:
    """Every ``(table, column)`` of the whole database holding the marker, in any type.

    Every table the introspection lists (the SQLite FTS table and its shadow
    tables too), every column, cast to text: text, JSON, a search vector.
    """
    found: set[tuple[str, str]] = set()
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            for column in connection.introspection.get_table_description(cursor, table):
                cursor.execute(
                    f"SELECT COUNT(*) FROM {quote(table)}"
                    f" WHERE LOWER(CAST({quote(column.name)} AS TEXT)) LIKE %s",
                    [f"%{MARK}%"],
                )
                if cursor.fetchone()[0]:
                    found.add((table, column.name))
        if connection.vendor == "sqlite":
            # What the full-text index finds, beside what its tables show.
            cursor.execute(
                "SELECT COUNT(*) FROM conversations_message_fts"
                " WHERE conversations_message_fts MATCH %s",
                [MARK],
            )
            if cursor.fetchone()[0]:
                found.add(("conversations_message_fts", "MATCH"))
    return found


def _plant(user, profile) -> None:
    """The marker in each column a user's activity fills, through the app where it can."""
    conversation = Conversation.objects.create(
        owner=user, title=f"Trip {MARK}", profile=profile, metadata={"note": MARK, MARK: 1}
    )
    provider = ScriptedProvider(
        [
            scripted_calls(("get_weather", {"city": MARK}), usage=Usage(prompt_tokens=9)),
            scripted_text(f"It rains in {MARK}.", usage=Usage(prompt_tokens=12)),
        ]
    )
    run_tool_loop(conversation=conversation, content=f"Weather in {MARK}?", provider=provider)
    Message.objects.filter(conversation=conversation).update(provider_metadata={"id": MARK})
    call = ToolCall.objects.get(conversation=conversation)
    ToolCall.objects.filter(pk=call.pk).update(raw_arguments=f'{{"city": "{MARK}"}}', error=MARK)
    run = Run.objects.get(conversation=conversation)
    Run.objects.filter(pk=run.pk).update(error_message=MARK, final_content=MARK)
    approval = ToolApproval.objects.create(
        tool_call=call, run=run, level="staff", arguments_digest="0" * 64
    )
    ToolApproval.objects.filter(pk=approval.pk).update(
        decision="rejected", reason=f"No: {MARK}", decided_at=timezone.now()
    )
    MCPCall.objects.create(
        user=user,
        tool=f"tool_{MARK}",
        arguments={"q": MARK, MARK: [MARK]},
        status="rejected",
        error=MARK,
        duration_ms=1,
        result_bytes=1,
    )


@pytest.mark.parametrize("mode", ["delete", "redact"])
def test_erasing_a_user_leaves_their_text_nowhere_in_the_database(mode, user, other_user, profile):
    _plant(user, profile)
    planted = _scan()
    # The planting reached every place a user's text lives (so the scan can see a leak).
    assert {
        ("conversations_conversation", "title"),
        ("conversations_conversation", "metadata"),
        ("conversations_message", "content"),
        ("conversations_message", "provider_metadata"),
        ("conversations_toolcall", "arguments"),
        ("conversations_toolcall", "raw_arguments"),
        ("conversations_toolcall", "error"),
        ("conversations_run", "error_message"),
        ("conversations_run", "final_content"),
        ("conversations_toolapproval", "reason"),
        ("conversations_mcpcall", "tool"),
        ("conversations_mcpcall", "arguments"),
        ("conversations_mcpcall", "error"),
    } <= planted
    search = (
        ("conversations_message", "search_vector")
        if connection.vendor == "postgresql"
        else ("conversations_message_fts", "MATCH")
    )
    assert search in planted
    kept = MCPCall.objects.create(
        user=other_user,
        tool="add",
        arguments={"a": 1},
        status="succeeded",
        duration_ms=1,
        result_bytes=1,
    )

    erase_user(user=user, mode=mode)

    assert _scan() == set()
    assert MCPCall.objects.filter(pk=kept.pk).exists()


def test_redaction_keeps_the_mcp_audit_shape_but_not_its_text(user, profile):
    _plant(user, profile)
    erase_user(user=user, mode="redact")
    call = MCPCall.objects.get(user=user)
    assert (call.status, call.duration_ms, call.result_bytes, call.error) == ("rejected", 1, 1, "")
    assert call.arguments == {"redacted": "[redacted]"}
    approval = ToolApproval.objects.get()
    assert (approval.decision, approval.reason) == ("rejected", "")


@pytest.mark.parametrize(("mode", "verb"), [("delete", "deleted"), ("redact", "redacted")])
def test_the_command_reports_the_mcp_calls_it_would_erase_and_changes_nothing(
    mode, verb, user, profile
):
    _plant(user, profile)
    out = StringIO()
    call_command("erase_user", user.username, "--mode", mode, "--dry-run", stdout=out)
    assert "1 MCP call(s) would be " + verb in out.getvalue()
    assert MCPCall.objects.get(user=user).error == MARK
