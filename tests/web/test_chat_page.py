"""The chat page view: login, the shell it renders, and whose conversations it lists."""

from __future__ import annotations

import io
import re
import uuid
from datetime import date, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from conversations.domain import ChatMessage
from conversations.models import Conversation
from conversations.services import append_messages
from conversations.services.history.branches import fork_conversation
from conversations.web.views import date_group
from project.demo_tools.management.commands.setup_demo import DEMO_USERNAME

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="alice-password")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="bob-password")


def test_anonymous_users_are_sent_to_the_login_page(client):
    response = client.get("/chat/")

    assert response.status_code == 302
    assert response["Location"] == "/chat/login/?next=/chat/"


def test_anonymous_users_cannot_open_a_conversation_either(client, alice):
    conversation = Conversation.objects.create(owner=alice, title="Private")

    response = client.get(f"/chat/{conversation.pk}/")

    assert response.status_code == 302
    assert response["Location"].startswith("/chat/login/?next=")


def test_the_page_renders_the_app_shell(client, alice):
    client.force_login(alice)

    response = client.get(reverse("conversations_web:chat"))

    assert response.status_code == 200
    html = response.content.decode()
    assert '<script type="module" src="/static/conversations/chat.js"></script>' in html
    assert 'href="/static/conversations/chat.css"' in html
    # The message box has a label, and the form carries a CSRF token for the API calls.
    assert '<label for="llm-message">Message</label>' in html
    assert 'id="llm-message"' in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert "csrftoken" in response.cookies
    # Where the script finds the API, and an alert region for errors.
    assert 'data-api-root="/api/"' in html
    assert 'role="alert"' in html
    assert '<label for="llm-profile">Profile</label>' in html
    assert "New conversation" in html


def test_the_page_lists_only_the_users_own_conversations_newest_first(client, alice, bob):
    older = Conversation.objects.create(owner=alice, title="Alice older")
    newer = Conversation.objects.create(owner=alice, title="Alice newer")
    Conversation.objects.filter(pk=older.pk).update(updated_at=newer.updated_at.replace(year=2020))
    secret = Conversation.objects.create(owner=bob, title="Bob's secret plans")
    client.force_login(alice)

    html = client.get("/chat/").content.decode()

    assert html.index("Alice newer") < html.index("Alice older")
    assert "secret plans" not in html
    assert str(secret.pk) not in html


def test_titles_are_escaped(client, alice):
    Conversation.objects.create(owner=alice, title="<script>alert(1)</script>")
    client.force_login(alice)

    html = client.get("/chat/").content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_conversation_of_the_user_opens_by_url(client, alice):
    conversation = Conversation.objects.create(owner=alice, title="Weather talk")
    client.force_login(alice)

    response = client.get(reverse("conversations_web:conversation", args=[conversation.pk]))

    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-conversation="{conversation.pk}"' in html
    assert 'aria-current="page"' in html
    assert "<title>Weather talk · Chat</title>" in html


def test_another_users_conversation_is_a_404_like_a_missing_one(client, alice, bob):
    secret = Conversation.objects.create(owner=bob, title="Bob's secret plans")
    client.force_login(alice)

    foreign = client.get(f"/chat/{secret.pk}/")
    missing = client.get(f"/chat/{uuid.uuid4()}/")

    assert foreign.status_code == missing.status_code == 404
    assert b"secret plans" not in foreign.content


def test_the_page_lists_a_bounded_number_of_conversations(
    client, alice, django_assert_max_num_queries
):
    Conversation.objects.bulk_create(
        [Conversation(owner=alice, title=f"Conversation {i}") for i in range(60)]
    )
    client.force_login(alice)

    with django_assert_max_num_queries(4):
        html = client.get("/chat/").content.decode()

    assert html.count('class="llm-conv-title"') == 50


def test_the_sidebar_lists_roots_and_a_branch_still_opens(client, user, conversation):
    append_messages(conversation=conversation, messages=[ChatMessage.user("hello")])
    branch = fork_conversation(conversation=conversation, position=0)
    client.force_login(user)
    page = client.get(f"/chat/{branch.pk}/")
    assert page.status_code == 200
    groups = page.context["conversation_groups"]
    assert [(label, [c.pk for c in items]) for label, items in groups] == [
        ("Today", [conversation.pk])
    ]
    assert page.context["current"] == branch


def test_the_sidebar_comes_grouped_by_date_as_the_page_draws_it(client, user):
    # The page redraws the list with its date headings as it starts; a list
    # drawn without them would move under a pointer about to click it.
    now = timezone.now()
    for title, days in (("Old", 40), ("Monthly", 12), ("Weekly", 3), ("Yday", 1), ("Now", 0)):
        Conversation.objects.create(owner=user, title=title)
        Conversation.objects.filter(owner=user, title=title).update(
            updated_at=now - timedelta(days=days)
        )
    client.force_login(user)
    html = client.get("/chat/").content.decode()
    headings = re.findall(r'<h3 class="llm-conv-group-title">([^<]+)</h3>', html)
    assert headings == ["Today", "Yesterday", "Previous 7 days", "Previous 30 days", "Older"]
    titles = re.findall(r'<span class="llm-conv-title">([^<]+)</span>', html)
    assert titles == ["Now", "Yday", "Weekly", "Monthly", "Old"]


def test_the_date_headings_follow_the_pages_bounds():
    today = date(2026, 12, 1)
    labels = [date_group(today - timedelta(days=d), today) for d in (-1, 0, 1, 2, 6, 7, 29, 30)]
    assert labels == [
        "Today",
        "Today",
        "Yesterday",
        "Previous 7 days",
        "Previous 7 days",
        "Previous 30 days",
        "Previous 30 days",
        "Older",
    ]


def test_an_ordinary_user_logs_in_on_the_chats_own_page_and_lands_on_the_chat(client, bob):
    page = client.get("/chat/login/?next=/chat/")
    assert page.status_code == 200
    assert 'name="username"' in page.content.decode()
    response = client.post(
        "/chat/login/", {"username": "bob", "password": "bob-password", "next": "/chat/"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/chat/"
    assert client.get("/chat/").status_code == 200


def test_logging_out_takes_a_post_and_lands_on_the_login_page(client, alice):
    client.force_login(alice)
    assert 'action="/chat/logout/"' in client.get("/chat/").content.decode()

    response = client.post("/chat/logout/")

    assert response.status_code == 302
    assert response["Location"] == "/chat/login/"
    assert client.get("/chat/").status_code == 302


def test_the_demo_user_is_not_staff():
    call_command("setup_demo", stdout=io.StringIO())
    demo = get_user_model().objects.get(username=DEMO_USERNAME)
    assert not demo.is_staff and not demo.is_superuser
