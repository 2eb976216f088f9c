"""Files go with what referenced them: conversation deletes, purges, redaction, erasure, the command.

An attachment that another message of the same owner still references
survives; an upload not yet sent survives a purge (not an erasure); the
stored objects go with their rows, once the deletion is committed.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.utils import timezone

from conversations.domain import ChatMessage
from conversations.models import Attachment, Conversation, MessageAttachment, Profile
from conversations.selectors import attachment_part
from conversations.services import (
    append_messages,
    delete_conversation,
    erase_user,
    purge_conversations,
    redact_conversation,
    store_attachment,
)

from ..files import pdf, png

# Files are deleted on commit: the tests commit.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def stored_files() -> set[str]:
    root = Path(django_settings.MEDIA_ROOT) / "conversations" / "attachments"
    return {path.name for path in root.iterdir()} if root.exists() else set()


def file_of(attachment: Attachment) -> str:
    return Path(attachment.file.name).name


def say(conversation, *attachments, content="look"):
    message = ChatMessage.user(content, parts=[attachment_part(a) for a in attachments])
    append_messages(conversation=conversation, messages=[message, ChatMessage.assistant("ok")])


@pytest.fixture
def files(user):
    shared = store_attachment(owner=user, file=png(), name="shared.png").attachment
    own = store_attachment(owner=user, file=pdf("only here"), name="own.pdf").attachment
    return shared, own


def test_a_blob_referenced_by_another_message_survives_a_conversation_delete(user, files):
    shared, own = files
    old = Conversation.objects.create(owner=user, title="old")
    kept = Conversation.objects.create(owner=user, title="kept")
    say(old, shared, own)
    say(kept, shared)
    delete_conversation(conversation=old)
    assert set(Attachment.objects.values_list("name", flat=True)) == {"shared.png"}
    assert stored_files() == {file_of(shared)}


def test_purge_conversations_deletes_the_files_only_its_conversations_referenced(
    user, files, language_model
):
    shared, own = files
    profile = Profile.objects.create(
        slug="short", name="Short", language_model=language_model, retention_days=1
    )
    expired = Conversation.objects.create(owner=user, title="expired", profile=profile)
    recent = Conversation.objects.create(owner=user, title="recent")
    say(expired, shared, own)
    say(recent, shared)
    unsent = store_attachment(owner=user, file=b"draft,1\n", name="draft.csv").attachment
    report = purge_conversations(now=timezone.now() + timedelta(days=2))
    assert report.done == (expired.pk,)
    assert set(Attachment.objects.values_list("name", flat=True)) == {"shared.png", "draft.csv"}
    assert stored_files() == {file_of(shared), file_of(unsent)}


def test_erase_user_leaves_none_of_their_attachments_or_files(user, other_user, files):
    conversation = Conversation.objects.create(owner=user)
    say(conversation, *files)
    store_attachment(owner=user, file=b"never sent\n", name="draft.txt")
    theirs = store_attachment(owner=other_user, file=png(), name="theirs.png").attachment
    dry = erase_user(user=user, dry_run=True)
    assert dry.attachments == 3 and Attachment.objects.filter(owner=user).count() == 3
    report = erase_user(user=user)
    assert report.attachments == 3
    assert not Attachment.objects.filter(owner=user).exists()
    assert stored_files() == {file_of(theirs)}


def test_redacting_a_conversation_removes_its_references_and_orphaned_files(user, files):
    shared, own = files
    redacted = Conversation.objects.create(owner=user)
    other = Conversation.objects.create(owner=user)
    say(redacted, shared, own)
    say(other, shared)
    redact_conversation(conversation=redacted)
    assert not MessageAttachment.objects.filter(message__conversation=redacted).exists()
    assert set(Attachment.objects.values_list("name", flat=True)) == {"shared.png"}
    assert stored_files() == {file_of(shared)}


def test_the_purge_attachments_command_keeps_orphans_within_the_grace_period(user, files):
    shared, own = files
    say(Conversation.objects.create(owner=user), shared)
    Attachment.objects.filter(pk=own.pk).update(created_at=timezone.now() - timedelta(hours=30))
    fresh = store_attachment(owner=user, file=b"fresh\n", name="fresh.txt").attachment
    out = StringIO()
    call_command("purge_attachments", "--dry-run", stdout=out)
    assert "1 attachment(s) would be deleted" in out.getvalue()
    call_command("purge_attachments", "--older-than", "24", stdout=out)
    assert "1 attachment(s) deleted" in out.getvalue()
    assert set(Attachment.objects.values_list("pk", flat=True)) == {shared.pk, fresh.pk}
    assert stored_files() == {file_of(shared), file_of(fresh)}
    call_command("purge_attachments", "--older-than", "0", stdout=out)
    assert set(Attachment.objects.values_list("pk", flat=True)) == {shared.pk}
