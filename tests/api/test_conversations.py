"""Conversations: list (search, cursor, constant queries), create, show, change, delete."""

from __future__ import annotations

import base64

import pytest
from django.urls import reverse

from conversations.models import Conversation, Message, Profile, Run, ToolCall

from .conftest import scripted_turn

pytestmark = pytest.mark.django_db

LIST = reverse("conversations:conversation-list")


def detail(demo_conversation):
    return reverse("conversations:conversation-detail", args=[demo_conversation.pk])


def test_list_shows_each_conversation_with_counts_and_last_run(api, history, demo_conversation):
    response = api.get(LIST)
    assert response.status_code == 200
    body = response.json()
    assert body["previous"] is None and body["next"] is None
    (item,) = body["results"]
    demo_conversation.refresh_from_db()
    assert item == {
        "id": str(demo_conversation.pk),
        "title": "Weather talk",
        "profile": "demo",
        "metadata": {},
        "created_at": item["created_at"],
        "updated_at": item["updated_at"],
        "message_count": 5,
        "last_run": {"id": str(history.pk), "status": "completed"},
        "forked_from": None,
        "forked_at_position": None,
        "branch_root": str(demo_conversation.pk),
    }


def test_list_orders_by_last_update_and_searches_titles(api, user):
    first = Conversation.objects.create(owner=user, title="Trip to Paris")
    second = Conversation.objects.create(owner=user, title="Groceries")
    third = Conversation.objects.create(owner=user, title="paris again")
    Conversation.objects.filter(pk=second.pk).update(title="Groceries!")  # no updated_at change
    api.patch(detail(first), {"title": "Trip to Paris (v2)"}, format="json")
    ids = [c["id"] for c in api.get(LIST).json()["results"]]
    assert ids == [str(first.pk), str(third.pk), str(second.pk)]
    found = [c["title"] for c in api.get(LIST, {"q": "PARIS"}).json()["results"]]
    assert found == ["Trip to Paris (v2)", "paris again"]


def test_list_cursor_pagination_walks_every_conversation_once(api, user):
    made = {str(Conversation.objects.create(owner=user, title=f"c{i}").pk) for i in range(7)}
    seen, url, pages = [], LIST + "?page_size=3", 0
    while url:
        body = api.get(url).json()
        seen += [c["id"] for c in body["results"]]
        url, pages = body["next"], pages + 1
    assert pages == 3
    assert len(seen) == 7 and set(seen) == made


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all",
        base64.b64encode(b"p=yesterday").decode(),
        base64.b64encode(b"p=2024-01-01 10:00:00").decode(),  # naive
        base64.b64encode(b"p=2024-13-45T00:00:00+00:00").decode(),
        base64.b64encode(b"o=x").decode(),
    ],
)
def test_a_forged_cursor_is_a_400_not_a_crash(api, demo_conversation, cursor):
    response = api.get(LIST, {"cursor": cursor})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_cursor"
    assert [(e["parameter"], e["code"]) for e in body["errors"]] == [("cursor", "invalid_cursor")]


def test_search_rejects_text_no_database_can_compare(api, demo_conversation):
    response = api.get(LIST, {"q": "a\x00b"})
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "pointer": None,
            "parameter": "q",
            "code": "null_characters_not_allowed",
            "detail": "Null characters are not allowed.",
        }
    ]


@pytest.mark.parametrize("count", [5, 50])
def test_list_queries_do_not_grow_with_the_page(
    api, user, profile, count, django_assert_max_num_queries
):
    for index in range(count):
        conversation = Conversation.objects.create(owner=user, title=f"c{index}", profile=profile)
        if index % 2 == 0:
            scripted_turn(conversation)
    with django_assert_max_num_queries(1):
        response = api.get(LIST, {"page_size": 100})
    assert len(response.json()["results"]) == count
    assert sum(c["message_count"] for c in response.json()["results"]) == 5 * len(
        range(0, count, 2)
    )


def test_create_with_profile_and_metadata(api, user, profile):
    response = api.post(
        LIST, {"title": "New", "profile": "demo", "metadata": {"tags": ["a"]}}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["title"] == "New" and body["profile"] == "demo"
    assert body["metadata"] == {"tags": ["a"]}
    assert body["message_count"] == 0 and body["last_run"] is None
    conversation = Conversation.objects.get(pk=body["id"])
    assert conversation.owner == user and conversation.profile == profile


def test_create_with_nothing(api):
    response = api.post(LIST, {}, format="json")
    assert response.status_code == 201
    assert response.json()["title"] == "" and response.json()["profile"] is None


@pytest.mark.parametrize(
    ("body", "pointer", "code"),
    [
        ({"title": "x" * 201}, "/title", "max_length"),
        ({"title": None}, "/title", "null"),
        ({"title": "a\x00b"}, "/title", "null_characters_not_allowed"),
        ({"profile": "nope"}, "/profile", "does_not_exist"),
        ({"profile": "inactive"}, "/profile", "does_not_exist"),
        ({"profile": "bad\x00slug"}, "/profile", "does_not_exist"),
        ({"profile": 7}, "/profile", "does_not_exist"),
        ({"metadata": [1, 2]}, "/metadata", "not_an_object"),
        ({"metadata": "text"}, "/metadata", "not_an_object"),
        ({"metadata": None}, "/metadata", "null"),
        ({"metadata": {"k": "a\x00b"}}, "/metadata/k", "null_characters_not_allowed"),
        (
            {"metadata": {"a/b": {"c": ["\x00"]}}},
            "/metadata/a~1b/c/0",
            "null_characters_not_allowed",
        ),
    ],
)
def test_create_rejects_invalid_fields(api, language_model, body, pointer, code):
    Profile.objects.create(
        slug="inactive", name="Off", language_model=language_model, is_active=False
    )
    response = api.post(LIST, body, format="json")
    assert response.status_code == 400
    data = response.json()
    assert data["code"] == "invalid"
    assert [(e["pointer"], e["code"]) for e in data["errors"]] == [(pointer, code)]
    assert not Conversation.objects.exists()


def test_malformed_json_is_a_parse_error(api):
    response = api.generic("POST", LIST, "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"


def test_only_json_is_accepted(api):
    response = api.post(LIST, {"title": "x"})  # multipart
    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"


def test_wrong_method_is_405_in_the_error_shape(api, demo_conversation):
    response = api.put(detail(demo_conversation), {"title": "x"}, format="json")
    assert response.status_code == 405
    assert response.json() == {
        "code": "method_not_allowed",
        "detail": 'Method "PUT" not allowed.',
        "errors": [],
    }


def test_show(api, history, demo_conversation):
    response = api.get(detail(demo_conversation))
    assert response.status_code == 200
    assert response.json()["message_count"] == 5
    assert response.json()["last_run"]["status"] == "completed"


def test_patch_changes_only_what_is_sent(api, demo_conversation, language_model):
    Profile.objects.create(slug="other", name="Other", language_model=language_model)
    demo_conversation.metadata = {"keep": True}
    demo_conversation.save()
    before = demo_conversation.updated_at
    response = api.patch(detail(demo_conversation), {"profile": "other"}, format="json")
    assert response.status_code == 200
    assert response.json()["profile"] == "other"
    assert response.json()["title"] == "Weather talk"
    assert response.json()["metadata"] == {"keep": True}
    demo_conversation.refresh_from_db()
    assert demo_conversation.profile.slug == "other" and demo_conversation.updated_at > before
    response = api.patch(
        detail(demo_conversation), {"profile": None, "title": "", "metadata": {}}, format="json"
    )
    assert response.json()["profile"] is None
    assert response.json()["title"] == "" and response.json()["metadata"] == {}


def test_patch_validates(api, demo_conversation):
    response = api.patch(detail(demo_conversation), {"metadata": [1]}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/metadata"


def test_delete_removes_the_history(api, history, demo_conversation):
    response = api.delete(detail(demo_conversation))
    assert response.status_code == 204
    assert not Conversation.objects.filter(pk=demo_conversation.pk).exists()
    assert not Message.objects.exists() and not ToolCall.objects.exists()
    assert not Run.objects.exists()
    assert api.get(detail(demo_conversation)).status_code == 404


def test_delete_while_a_run_is_running_is_409(api, demo_conversation, running_run):
    response = api.delete(detail(demo_conversation))
    assert response.status_code == 409
    assert response.json()["code"] == "conversation_busy"
    assert Conversation.objects.filter(pk=demo_conversation.pk).exists()
