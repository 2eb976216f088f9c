"""The admin: a conversation's family with links, and the full-text search of messages."""

from __future__ import annotations

import pytest

from conversations.domain import ChatMessage, ToolCall
from conversations.models import Conversation, Message
from conversations.services import append_messages, create_conversation
from conversations.services.history.branches import fork_conversation

from .conftest import admin_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def family(admin_user):
    root = create_conversation(owner=admin_user, title="Root talk")
    append_messages(
        conversation=root,
        messages=[
            ChatMessage.user("Find the obsidian price"),
            ChatMessage.assistant_tool_calls(
                [ToolCall(id="c1", name="lookup", arguments={"item": "feldspar"})]
            ),
            ChatMessage.tool_result("c1", "malachite 12"),
            ChatMessage.assistant("Done."),
        ],
    )
    first = fork_conversation(conversation=root, position=3)
    second = fork_conversation(conversation=first, position=0)
    return root, first, second


def _page(client, obj):
    response = client.get(admin_url(obj))
    assert response.status_code == 200
    return response.content.decode()


def test_each_member_of_a_family_links_to_every_other(admin_client, family):
    second = family[2]
    for member in family:
        page = _page(admin_client, member)
        for other in family:
            assert f'href="{admin_url(other)}"' in page
        assert f'<strong><a href="{admin_url(member)}">' in page
    page = _page(admin_client, second)
    assert "root" in page and "branch at position 3" in page and "branch at position 0" in page


def test_a_conversation_without_branches_says_so(admin_client, admin_user):
    alone = create_conversation(owner=admin_user, title="Alone")
    assert "No branches." in _page(admin_client, alone)


@pytest.mark.parametrize(
    ("term", "positions"),
    [("obsidian", {0}), ("feldspar", {1}), ("lookup", {1, 2}), ("malachite", {2})],
)
def test_the_message_search_is_the_full_text_search(admin_client, family, term, positions):
    root = family[0]
    response = admin_client.get(admin_url(Message, "changelist"), {"q": term})
    found = [m for m in response.context["cl"].result_list if m.conversation_id == root.pk]
    assert {m.position for m in found} == positions


def test_the_conversation_search_finds_words_in_messages(admin_client, family, admin_user):
    create_conversation(owner=admin_user, title="Unrelated")
    response = admin_client.get(admin_url(Conversation, "changelist"), {"q": "feldspar"})
    assert {c.pk for c in response.context["cl"].result_list} == {family[0].pk, family[1].pk}
    response = admin_client.get(admin_url(Conversation, "changelist"), {"q": "Unrelated"})
    assert [c.title for c in response.context["cl"].result_list] == ["Unrelated"]
