"""Retention, erasure and redaction: what is removed, what is kept, what is skipped."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command, load_command_class
from django.db.models import Sum
from django.utils import timezone

from conversations.domain import Usage
from conversations.exceptions import ConversationBusy, InvalidArgumentError
from conversations.models import Conversation, Message, Run, ToolCall
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import export_payload, run_tool_loop
from conversations.services.history import EXPORT_FORMATS
from conversations.services.history.branches import fork_conversation
from conversations.services.history.retention import (
    erase_user,
    expired_conversations,
    purge_conversations,
    redact_conversation,
)

pytestmark = pytest.mark.django_db


def _turn(conversation):
    provider = ScriptedProvider(
        [
            scripted_calls(
                ("get_weather", {"city": "Paris"}),
                ("calculate", {"expression": "6*7"}),
                usage=Usage(prompt_tokens=20, completion_tokens=5),
            ),
            scripted_text("Paris: light rain; 6*7 = 42.", usage=Usage(prompt_tokens=40)),
        ]
    )
    return run_tool_loop(conversation=conversation, content="Weather in Paris?", provider=provider)


def _age(conversation, days):
    """Make every message of ``conversation`` (and the row itself) ``days`` old."""
    then = timezone.now() - timedelta(days=days)
    Message.objects.filter(conversation=conversation).update(created_at=then)
    Conversation.objects.filter(pk=conversation.pk).update(created_at=then)


@pytest.fixture
def retained(profile):
    profile.retention_days = 30
    profile.save()
    return profile


@pytest.fixture
def old(user, retained):
    conversation = Conversation.objects.create(owner=user, title="Old", profile=retained)
    _turn(conversation)
    _age(conversation, 31)
    return conversation


@pytest.fixture
def recent(user, retained):
    conversation = Conversation.objects.create(owner=user, title="Recent", profile=retained)
    _turn(conversation)
    _age(conversation, 29)
    return conversation


def run_command(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_only_conversations_past_their_profiles_retention_expire(old, recent, user, language_model):
    from conversations.models import Profile

    forever = Profile.objects.create(slug="forever", name="Forever", language_model=language_model)
    kept = Conversation.objects.create(owner=user, profile=forever)
    _age(kept, 3650)
    no_profile = Conversation.objects.create(owner=user)
    _age(no_profile, 3650)
    assert list(expired_conversations()) == [old]


def test_an_empty_conversation_expires_by_its_creation(user, retained):
    empty = Conversation.objects.create(owner=user, profile=retained)
    assert not expired_conversations().exists()
    _age(empty, 31)
    assert list(expired_conversations()) == [empty]


def test_a_recent_message_keeps_an_old_conversation(old):
    Message.objects.filter(conversation=old, position=4).update(created_at=timezone.now())
    assert not expired_conversations().exists()


def test_dry_run_changes_nothing(old, recent):
    before = (Conversation.objects.count(), Message.objects.count(), ToolCall.objects.count())
    out = run_command("purge_conversations", "--dry-run")
    assert f"would be deleted: conversation {old.pk}" in out
    assert "1 conversation(s) would be deleted, 0 skipped (dry run" in out
    assert (Conversation.objects.count(), Message.objects.count(), ToolCall.objects.count()) == (
        before
    )
    out = run_command("purge_conversations", "--dry-run", "--mode", "redact")
    assert Message.objects.get(conversation=old, position=0).content == "Weather in Paris?"


def test_purge_deletes_whole_expired_conversations(old, recent):
    out = run_command("purge_conversations")
    assert f"deleted: conversation {old.pk}" in out
    assert list(Conversation.objects.all()) == [recent]
    assert not Message.objects.filter(conversation_id=old.pk).exists()
    assert not ToolCall.objects.filter(conversation_id=old.pk).exists()
    assert not Run.objects.filter(conversation_id=old.pk).exists()


def test_a_conversation_with_a_running_run_is_skipped_and_reported(old):
    Run.objects.create(conversation=old, status=Run.Status.RUNNING, max_iterations=3)
    out = run_command("purge_conversations")
    assert f"skipped (a run is running): conversation {old.pk}" in out
    assert "0 conversation(s) deleted, 1 skipped" in out
    assert Conversation.objects.filter(pk=old.pk).exists()
    report = purge_conversations(mode="redact")
    assert report.skipped == (old.pk,) and report.done == ()
    assert Message.objects.get(conversation=old, position=0).content == "Weather in Paris?"


def test_a_waiting_run_also_keeps_its_conversation(old):
    # Queued for a worker: running, never claimed.
    Run.objects.create(conversation=old, status=Run.Status.RUNNING, max_iterations=3)
    assert erase_user(user=old.owner).skipped == (old.pk,)


def test_redaction_keeps_shape_statuses_runs_and_usage(old):
    usage_before = Run.objects.filter(conversation=old).aggregate(Sum("prompt_tokens"))
    tokens_before = Message.objects.filter(conversation=old).aggregate(Sum("prompt_tokens"))
    shape_before = list(
        Message.objects.filter(conversation=old).values_list("position", "role", "tool_call_id")
    )
    calls_before = list(ToolCall.objects.filter(conversation=old).values_list("call_id", "status"))

    report = purge_conversations(mode="redact")

    assert report.done == (old.pk,)
    old.refresh_from_db()
    assert (old.title, old.metadata) == ("", {})
    messages = Message.objects.filter(conversation=old).order_by("position")
    assert {m.content for m in messages if m.content} == {"[redacted]"}
    assert list(messages.values_list("position", "role", "tool_call_id")) == shape_before
    calls = ToolCall.objects.filter(conversation=old)
    assert list(calls.values_list("call_id", "status")) == calls_before
    assert {str(c.arguments) for c in calls} == {"{'redacted': '[redacted]'}"}
    run = Run.objects.get(conversation=old)
    assert (run.final_content, run.status) == ("", Run.Status.COMPLETED)
    assert Run.objects.filter(conversation=old).aggregate(Sum("prompt_tokens")) == usage_before
    assert Message.objects.filter(conversation=old).aggregate(Sum("prompt_tokens")) == (
        tokens_before
    )
    assert "Paris" not in str(get_history(conversation=old))


def test_a_redacted_history_is_still_valid_for_every_provider(old, profile):
    redact_conversation(conversation=old)
    history = get_history(conversation=old)
    assert [m.role.value for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    for fmt in EXPORT_FORMATS:
        payload = export_payload(conversation=old, format=fmt)
        assert "Paris" not in str(payload)
        assert "[redacted]" in str(payload)
    # The rules still hold: the next turn can be appended and answered.
    _turn(old)
    assert Message.objects.filter(conversation=old).count() == 10


def test_redacting_a_busy_conversation_is_refused(old):
    Run.objects.create(conversation=old, status=Run.Status.RUNNING, max_iterations=3)
    with pytest.raises(ConversationBusy):
        redact_conversation(conversation=old)


def test_erase_user_deletes_everything_the_user_owns_and_nothing_else(
    old, recent, other_user, profile
):
    theirs = Conversation.objects.create(owner=other_user, profile=profile)
    _turn(theirs)
    branch = fork_conversation(conversation=recent, position=4)
    out = run_command("erase_user", old.owner.username)
    assert "3 conversation(s) deleted, 0 skipped" in out
    assert list(Conversation.objects.all()) == [theirs]
    assert Message.objects.filter(conversation=theirs).count() == 5
    assert not Conversation.objects.filter(pk=branch.pk).exists()


def test_erase_user_can_redact(old, recent):
    report = erase_user(user=old.owner, mode="redact")
    assert set(report.done) == {old.pk, recent.pk}
    assert set(Message.objects.exclude(content="").values_list("content", flat=True)) == {
        "[redacted]"
    }


def test_erase_user_needs_a_known_user_and_a_known_mode(db):
    with pytest.raises(CommandError, match="no user with username 'nobody'"):
        run_command("erase_user", "nobody")
    with pytest.raises(InvalidArgumentError) as caught:
        purge_conversations(mode="shred")
    assert caught.value.field == "mode"


def test_deleting_the_source_of_a_branch_keeps_the_branch(old):
    branch = fork_conversation(conversation=old, position=4)
    purge_conversations()
    branch.refresh_from_db()
    assert branch.forked_from_id is None
    assert branch.messages.count() == 5


def test_both_retention_commands_take_the_same_dry_run_and_mode_options(db):
    def options(name):
        parser = load_command_class("conversations", name).create_parser("manage.py", name)
        return {
            action.dest: (action.choices, action.default, action.help)
            for action in parser._actions
            if action.dest in {"dry_run", "mode"}
        }

    assert options("erase_user") == options("purge_conversations")
    assert set(options("erase_user")) == {"dry_run", "mode"}


def test_erase_user_dry_run_redact_reports_and_changes_nothing(old, recent):
    out = run_command("erase_user", old.owner.username, "--dry-run", "--mode", "redact")
    assert "2 conversation(s) would be redacted, 0 skipped (dry run: nothing changed)" in out
    assert not Message.objects.filter(content="[redacted]").exists()
