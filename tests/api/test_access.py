"""Who may call what: authentication, tokens, sessions, and owner scoping (404, never 403)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from conversations.models import Conversation, Message, Run

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("get", "conversation-list", None),
    ("post", "conversation-list", None),
    ("post", "conversation-import", None),
    ("get", "conversation-detail", "conversation"),
    ("patch", "conversation-detail", "conversation"),
    ("delete", "conversation-detail", "conversation"),
    ("get", "conversation-messages", "conversation"),
    ("post", "conversation-messages", "conversation"),
    ("get", "conversation-runs", "conversation"),
    ("get", "conversation-export", "conversation"),
    ("get", "conversation-chat", "conversation"),
    ("post", "conversation-chat", "conversation"),
    ("get", "run-detail", "run"),
    ("get", "tool-list", None),
    ("get", "profile-list", None),
]

OWNED = [e for e in ENDPOINTS if e[2] is not None]

BODIES = {
    ("post", "conversation-list"): {"title": "x"},
    ("post", "conversation-import"): {"messages": [{"role": "user", "content": "hi"}]},
    ("patch", "conversation-detail"): {"title": "mine now"},
    ("post", "conversation-messages"): {"content": "Weather in Paris?"},
    ("post", "conversation-chat"): {
        "id": "chat",
        "messages": [{"id": "m", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
        "trigger": "submit-message",
    },
}


def _url(name, kind, demo_conversation, run):
    if kind == "conversation":
        return reverse(f"conversations:{name}", args=[demo_conversation.pk])
    if kind == "run":
        return reverse(f"conversations:{name}", args=[run.pk])
    return reverse(f"conversations:{name}")


@pytest.mark.parametrize(("method", "name", "kind"), ENDPOINTS)
def test_anonymous_requests_are_401_with_the_error_shape(
    anonymous, other_users_conversation, other_run, method, name, kind
):
    url = _url(name, kind, other_users_conversation, other_run)
    response = getattr(anonymous, method)(url, BODIES.get((method, name)), format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {
        "code": "not_authenticated",
        "detail": "Authentication credentials were not provided.",
        "errors": [],
    }


@pytest.mark.parametrize(("method", "name", "kind"), OWNED)
def test_another_users_objects_are_404_everywhere(
    api, other_users_conversation, other_run, method, name, kind
):
    before = (Message.objects.count(), Run.objects.count())
    url = _url(name, kind, other_users_conversation, other_run)
    response = getattr(api, method)(url, BODIES.get((method, name)), format="json")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "detail": "Not found.", "errors": []}
    # Nothing was changed, and the conversation still has its owner's title.
    assert (Message.objects.count(), Run.objects.count()) == before
    other_users_conversation.refresh_from_db()
    assert other_users_conversation.title == "Secret"


@pytest.mark.parametrize(("method", "name", "kind"), OWNED)
def test_a_missing_object_is_the_same_404(api, history, method, name, kind):
    import uuid

    missing = Conversation(pk=uuid.uuid4())
    missing_run = Run(pk=uuid.uuid4())
    url = _url(name, kind, missing, missing_run)
    response = getattr(api, method)(url, BODIES.get((method, name)), format="json")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_another_users_conversations_are_not_listed(
    api, demo_conversation, other_users_conversation
):
    response = api.get(reverse("conversations:conversation-list"))
    assert [c["id"] for c in response.json()["results"]] == [str(demo_conversation.pk)]


def test_a_token_authenticates(user, demo_conversation):
    token = Token.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    response = client.get(reverse("conversations:conversation-detail", args=[demo_conversation.pk]))
    assert response.status_code == 200


def test_a_wrong_token_is_401(demo_conversation):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-key")
    response = client.get(reverse("conversations:conversation-list"))
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


def test_a_session_authenticates_and_unsafe_requests_need_csrf(user, demo_conversation):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    url = reverse("conversations:conversation-detail", args=[demo_conversation.pk])
    assert client.get(url).status_code == 200
    response = client.patch(url, {"title": "new"}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert "CSRF" in response.json()["detail"]


def test_without_authtoken_installed_sessions_still_work(settings, user, demo_conversation):
    settings.INSTALLED_APPS = [
        a for a in settings.INSTALLED_APPS if a != "rest_framework.authtoken"
    ]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token whatever")
    # The token header is ignored (no Token model to look it up in): session only.
    response = client.get(reverse("conversations:conversation-list"))
    assert response.status_code == 403
    assert response.json()["code"] == "not_authenticated"
    client.force_login(user)
    assert client.get(reverse("conversations:conversation-list")).status_code == 200
