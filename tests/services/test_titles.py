"""A conversation title's length: one constant, the column's, used by every way in."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from conversations.api.serializers import (
    ConversationInputSerializer,
    ConversationListQuerySerializer,
    ImportInputSerializer,
)
from conversations.exceptions import InvalidArgumentError
from conversations.models import TITLE_MAX_LENGTH, Conversation
from conversations.services import create_conversation, update_conversation

pytestmark = pytest.mark.django_db

LONGEST = "t" * TITLE_MAX_LENGTH
TOO_LONG = LONGEST + "t"


def test_the_column_is_as_long_as_the_constant():
    assert Conversation._meta.get_field("title").max_length == TITLE_MAX_LENGTH


@pytest.mark.parametrize(
    "serializer", [ConversationInputSerializer, ImportInputSerializer], ids=lambda s: s.__name__
)
def test_the_api_accepts_the_longest_title_and_names_the_field_of_a_longer_one(serializer):
    assert serializer(data={"title": LONGEST, "messages": []}).is_valid()
    refused = serializer(data={"title": TOO_LONG, "messages": []})
    assert not refused.is_valid() and set(refused.errors) == {"title"}


def test_searching_titles_takes_a_query_as_long_as_a_title():
    assert ConversationListQuerySerializer(data={"q": LONGEST}).is_valid()
    assert not ConversationListQuerySerializer(data={"q": TOO_LONG}).is_valid()


def test_creating_takes_the_longest_title_and_refuses_a_longer_one(user):
    assert create_conversation(owner=user, title=LONGEST).title == LONGEST
    with pytest.raises(InvalidArgumentError) as refused:
        create_conversation(owner=user, title=TOO_LONG)
    assert (refused.value.code, refused.value.field) == ("invalid_title", "title")


def test_updating_refuses_a_title_longer_than_the_column_and_keeps_the_old_one(user):
    conversation = create_conversation(owner=user, title="Trip")
    with pytest.raises(InvalidArgumentError) as refused:
        update_conversation(conversation=conversation, title=TOO_LONG)
    assert (refused.value.code, refused.value.field) == ("invalid_title", "title")
    conversation.refresh_from_db()
    assert conversation.title == "Trip"
    assert update_conversation(conversation=conversation, title=LONGEST).title == LONGEST


def test_the_chat_command_cuts_a_long_question_to_the_longest_title():
    call_command("setup_demo", stdout=StringIO())
    question = "What time is it? " + "x" * TITLE_MAX_LENGTH
    call_command("chat", "--profile", "demo", question, stdout=StringIO())
    assert Conversation.objects.get().title == question[:TITLE_MAX_LENGTH]
