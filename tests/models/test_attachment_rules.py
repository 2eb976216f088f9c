"""The attachment rules, broken through raw SQL and the ORM: the database refuses each (both vendors).

A message may reference only attachments its conversation's owner owns; a
link, and an attachment's owner and content, never change once stored. The
uniqueness of (owner, sha256, media type) makes the same bytes one row.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from contextlib import contextmanager

import pytest
from django.db import IntegrityError, transaction
from django.db.models import RestrictedError

from conversations.models import Attachment, Conversation, Message, MessageAttachment

from . import sql
from .factories import add_message

pytestmark = pytest.mark.django_db


@contextmanager
def refused(*names):
    pattern = "|".join(re.escape(name) for name in names)
    with pytest.raises(IntegrityError, match=pattern), transaction.atomic():
        yield


def make_attachment(owner, data=b"png bytes", media_type="image/png"):
    return Attachment.objects.create(
        owner=owner,
        sha256=hashlib.sha256(data).hexdigest(),
        media_type=media_type,
        size=len(data),
        name="a.png",
        file=f"conversations/attachments/{uuid.uuid4().hex}",
    )


def insert_link(message, attachment, position=0):
    return sql.insert(
        MessageAttachment,
        message_id=message.pk,
        attachment_id=sql.db_id(Attachment, attachment.pk),
        position=position,
    )


@pytest.fixture
def user_message(conversation):
    return add_message(conversation, 0, "user", content="look")


def test_a_link_to_an_attachment_of_the_conversations_owner_is_accepted(user, user_message):
    attachment = make_attachment(user)
    insert_link(user_message, attachment)
    assert list(user_message.attachment_links.values_list("attachment_id", flat=True)) == [
        attachment.pk
    ]


def test_a_raw_link_to_another_owners_attachment_is_refused(other_user, user_message):
    foreign = make_attachment(other_user)
    with refused("conversations_messageattachment_same_owner"):
        insert_link(user_message, foreign)
    assert not MessageAttachment.objects.exists()


def test_an_orm_link_to_another_owners_attachment_is_refused(other_user, user_message):
    foreign = make_attachment(other_user)
    with refused("conversations_messageattachment_same_owner"):
        MessageAttachment.objects.bulk_create(
            [MessageAttachment(message=user_message, attachment=foreign, position=0)]
        )


def test_one_foreign_attachment_in_a_batch_refuses_the_whole_batch(user, other_user, user_message):
    own, foreign = make_attachment(user), make_attachment(other_user, b"other")
    with refused("conversations_messageattachment_same_owner"):
        MessageAttachment.objects.bulk_create(
            [
                MessageAttachment(message=user_message, attachment=own, position=0),
                MessageAttachment(message=user_message, attachment=foreign, position=1),
            ]
        )
    assert not MessageAttachment.objects.exists()


def test_a_link_cannot_be_moved_to_another_attachment_or_message(user, conversation):
    first = add_message(conversation, 0, "user", content="a")
    second = add_message(conversation, 1, "assistant", content="b")
    attachment, other = make_attachment(user), make_attachment(user, b"other bytes")
    link = insert_link(first, attachment)
    with refused("conversations_messageattachment_immutable"):
        sql.update(MessageAttachment, link, attachment_id=sql.db_id(Attachment, other.pk))
    with refused("conversations_messageattachment_immutable"):
        sql.update(MessageAttachment, link, message_id=second.pk)
    with refused("conversations_messageattachment_immutable"):
        sql.update(MessageAttachment, link, position=3)


def test_an_attachment_cannot_change_owner_so_a_link_stays_true(user, other_user, user_message):
    attachment = make_attachment(user)
    insert_link(user_message, attachment)
    with refused("conversations_attachment_immutable"):
        sql.update(Attachment, attachment.pk, owner_id=other_user.pk)
    with refused("conversations_attachment_immutable"):
        sql.update(Attachment, attachment.pk, sha256="f" * 64)
    # The name is not content: it may be corrected.
    sql.update(Attachment, attachment.pk, name="renamed.png")
    attachment.refresh_from_db()
    assert attachment.name == "renamed.png"


def test_the_same_bytes_and_type_of_one_owner_are_one_row(user, other_user):
    make_attachment(user)
    # SQLite names the columns of a unique constraint, PostgreSQL its name.
    with refused("conversations_attachment_content_unique", "conversations_attachment.owner_id"):
        make_attachment(user)
    # Another owner, or another type, is another row.
    make_attachment(other_user)
    make_attachment(user, media_type="text/plain")
    assert Attachment.objects.count() == 3


def test_a_sha256_that_is_not_hex_is_refused(user):
    with refused("conversations_attachment_sha256_hex"):
        sql.insert(
            Attachment,
            id=sql.db_id(Attachment, uuid.uuid4()),
            owner_id=user.pk,
            sha256="not a digest",
            media_type="image/png",
            size=1,
            file="x",
        )


def test_a_message_with_links_deletes_them_but_not_the_attachment(user, user_message):
    attachment = make_attachment(user)
    insert_link(user_message, attachment)
    Message.objects.filter(pk=user_message.pk).delete()
    assert not MessageAttachment.objects.exists()
    assert Attachment.objects.filter(pk=attachment.pk).exists()


def test_a_referenced_attachment_cannot_be_deleted_on_its_own(user, user_message):
    attachment = make_attachment(user)
    insert_link(user_message, attachment)
    with pytest.raises(RestrictedError), transaction.atomic():
        attachment.delete()


def test_deleting_the_conversation_with_the_owner_takes_links_and_attachments(user, user_message):
    insert_link(user_message, make_attachment(user))
    user.delete()
    assert not Attachment.objects.exists()
    assert not Conversation.objects.exists()
