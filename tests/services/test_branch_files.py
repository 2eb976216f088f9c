"""Branches copy references to files, never the files: one stored object however many branches."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings

from conversations.domain import ChatMessage
from conversations.models import Attachment, MessageAttachment, Run
from conversations.selectors import attachment_part, get_history
from conversations.services import (
    append_messages,
    edit_message,
    fork_conversation,
    regenerate_answer,
    store_attachment,
)

from ..files import png

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def stored_files() -> list[Path]:
    root = Path(django_settings.MEDIA_ROOT) / "conversations" / "attachments"
    return sorted(root.iterdir()) if root.exists() else []


@pytest.fixture
def picture(user):
    return store_attachment(owner=user, file=png(), name="p.png").attachment


@pytest.fixture
def talk(demo_conversation, picture):
    """User: a picture and a question; the answer; a second question."""
    append_messages(
        conversation=demo_conversation,
        messages=[
            ChatMessage.user("What is this?", parts=[attachment_part(picture)]),
            ChatMessage.assistant("A red square."),
            ChatMessage.user("Which red?"),
        ],
    )
    return demo_conversation


def files_of(conversation):
    return [
        [part.attachment_id for part in message.parts]
        for message in get_history(conversation=conversation)
    ]


def test_a_fork_references_the_same_attachment_and_stores_nothing(talk, picture):
    branch = fork_conversation(conversation=talk, position=1)

    assert files_of(branch) == [[str(picture.pk)], []]
    assert Attachment.objects.count() == 1 and len(stored_files()) == 1
    assert MessageAttachment.objects.filter(attachment=picture).count() == 2


def test_editing_a_later_message_keeps_the_earlier_files_by_reference(talk, picture):
    turn = edit_message(conversation=talk, position=2, content="Which shade of red?")

    assert turn.run.status == Run.Status.COMPLETED
    assert files_of(turn.branch)[0] == [str(picture.pk)]
    assert Attachment.objects.count() == 1 and len(stored_files()) == 1


def test_regenerating_keeps_the_users_files_by_reference(demo_conversation, picture):
    append_messages(
        conversation=demo_conversation,
        messages=[
            ChatMessage.user("What is this?", parts=[attachment_part(picture)]),
            ChatMessage.assistant("A red square."),
        ],
    )

    turn = regenerate_answer(conversation=demo_conversation)

    assert turn.run.status == Run.Status.COMPLETED
    assert files_of(turn.branch)[0] == [str(picture.pk)]
    assert Attachment.objects.count() == 1 and len(stored_files()) == 1
    assert MessageAttachment.objects.filter(attachment=picture).count() == 2
