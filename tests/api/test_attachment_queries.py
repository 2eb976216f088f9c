"""Reading a history with attachments costs no more queries than one without.

200 messages, 40 of them with an attachment: the provider's history is one
query (messages joined to calls and attachment links), the API's page of
messages one query more than the messages and their calls (the links with
their attachments), whatever the number of attachments.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations.domain import ChatMessage
from conversations.models import Conversation
from conversations.selectors import attachment_part, history_for_provider
from conversations.services import append_messages, store_attachment

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def history_of(user, *, with_files: bool) -> Conversation:
    """100 user messages (40 with a file when ``with_files``), each answered: 200 messages."""
    conversation = Conversation.objects.create(owner=user)
    messages = []
    for index in range(100):
        parts = []
        if with_files and index % 5 < 2:
            stored = store_attachment(
                owner=user, file=f"file {index}\n".encode(), name=f"{index}.txt"
            )
            parts = [attachment_part(stored.attachment)]
        messages += [
            ChatMessage.user(f"question {index}", parts=parts),
            ChatMessage.assistant("ok"),
        ]
    append_messages(conversation=conversation, messages=messages)
    return conversation


@pytest.mark.parametrize("with_files", [False, True])
def test_the_providers_history_of_200_messages_is_one_query(
    user, with_files, django_assert_num_queries
):
    conversation = history_of(user, with_files=with_files)
    with django_assert_num_queries(1):
        history = history_for_provider(conversation=conversation, profile=None)
    assert len(history) == 200
    assert sum(len(message.parts) for message in history) == (40 if with_files else 0)


@pytest.mark.parametrize("with_files", [False, True])
def test_a_page_of_200_messages_costs_the_same_queries_with_40_attachments(
    api, user, with_files, django_assert_num_queries
):
    conversation = history_of(user, with_files=with_files)
    url = reverse("conversations:conversation-messages", args=[conversation.pk])
    # The conversation, the messages, their calls, the provider's own tool calls, the
    # citations, and the attachment links with their attachments.
    with django_assert_num_queries(6):
        first = api.get(url, {"page_size": 100}).json()
    with django_assert_num_queries(6):
        second = api.get(first["next"]).json()
    results = first["results"] + second["results"]
    assert len(results) == 200
    assert sum(len(m["attachments"]) for m in results) == (40 if with_files else 0)
