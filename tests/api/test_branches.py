"""The branch endpoints: fork (and its 409 cut), edit, regenerate, the family, root-only lists."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.utils import timezone

from conversations.api.sse.slots import acquire_stream_slot, release_stream_slot
from conversations.models import Budget, BudgetCounter, Conversation, Run
from conversations.services.usage.budgets import period_bounds

from .conftest import scripted_turn

pytestmark = pytest.mark.django_db


def _url(conversation, tail):
    return f"/api/conversations/{conversation.pk}/{tail}"


def test_fork_answers_201_with_the_branch(api, history, demo_conversation):
    response = api.post(_url(demo_conversation, "fork/"), {"position": 3}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["forked_from"] == str(demo_conversation.pk)
    assert body["forked_at_position"] == 3
    assert body["branch_root"] == str(demo_conversation.pk)
    assert body["message_count"] == 4
    assert response["Location"].endswith(f"/api/conversations/{body['id']}/")


def test_a_cut_inside_a_tool_turn_answers_409(api, history, demo_conversation):
    response = api.post(_url(demo_conversation, "fork/"), {"position": 2}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "would_split_tool_call"
    assert Conversation.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "code"),
    [({}, "required"), ({"position": -1}, "min_value"), ({"position": 99}, "invalid_position")],
)
def test_a_bad_position_answers_400(api, history, demo_conversation, body, code):
    response = api.post(_url(demo_conversation, "fork/"), body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == code
    assert response.json()["errors"][0]["pointer"] == "/position"


def test_another_users_conversation_cannot_be_forked_edited_or_regenerated(
    other_api, history, demo_conversation
):
    assert other_api.post(_url(demo_conversation, "fork/"), {"position": 0}).status_code == 404
    edit = _url(demo_conversation, "messages/0/edit/")
    assert other_api.post(edit, {"content": "x"}, format="json").status_code == 404
    assert other_api.post(_url(demo_conversation, "regenerate/")).status_code == 404
    assert other_api.get(_url(demo_conversation, "branches/")).status_code == 404


def test_edit_answers_like_a_posted_message_in_a_new_branch(api, history, demo_conversation):
    response = api.post(
        _url(demo_conversation, "messages/0/edit/"), {"content": "Hello there"}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["conversation"]["forked_from"] == str(demo_conversation.pk)
    assert body["run"]["status"] == "completed"
    assert body["run"]["conversation"] == body["conversation"]["id"]
    assert body["messages"][0] == {**body["messages"][0], "role": "user", "content": "Hello there"}
    assert demo_conversation.messages.count() == 5


def test_edit_of_a_position_out_of_any_range_is_a_400(api, history, demo_conversation):
    url = _url(demo_conversation, f"messages/{10**30}/edit/")
    response = api.post(url, {"content": "x"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_position"


def test_edit_of_an_assistant_message_is_refused(api, history, demo_conversation):
    response = api.post(
        _url(demo_conversation, "messages/1/edit/"), {"content": "x"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_position"
    assert Conversation.objects.count() == 1


def test_regenerate_answers_again_in_a_new_branch(api, history, demo_conversation):
    response = api.post(_url(demo_conversation, "regenerate/"))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["conversation"]["forked_at_position"] == 0
    assert body["messages"][0]["role"] == "assistant"


def test_regenerate_without_a_user_message_is_a_400(api, demo_conversation):
    response = api.post(_url(demo_conversation, "regenerate/"))
    assert response.status_code == 400
    assert response.json()["code"] == "nothing_to_regenerate"


def test_the_family_lists_every_branch_with_where_it_forked(api, history, demo_conversation):
    first = api.post(_url(demo_conversation, "fork/"), {"position": 4}, format="json").json()
    branch = Conversation.objects.get(pk=first["id"])
    second = api.post(_url(branch, "fork/"), {"position": 0}, format="json").json()

    for member in (demo_conversation, branch):
        family = api.get(_url(member, "branches/")).json()
        assert [c["id"] for c in family] == [str(demo_conversation.pk), first["id"], second["id"]]
        assert [c["forked_at_position"] for c in family] == [None, 4, 0]


def test_lists_show_roots_unless_branches_all(api, history, demo_conversation):
    branch = api.post(_url(demo_conversation, "fork/"), {"position": 0}, format="json").json()
    roots = api.get("/api/conversations/").json()["results"]
    assert [c["id"] for c in roots] == [str(demo_conversation.pk)]
    every = api.get("/api/conversations/", {"branches": "all"}).json()["results"]
    assert {c["id"] for c in every} == {str(demo_conversation.pk), branch["id"]}
    bad = api.get("/api/conversations/", {"branches": "some"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["parameter"] == "branches"


def test_a_branch_of_another_users_history_is_never_listed(api, other_api, other_run):
    conversation = other_run.conversation
    fork = other_api.post(_url(conversation, "fork/"), {"position": 4}, format="json")
    assert fork.status_code == 201
    assert api.get("/api/conversations/", {"branches": "all"}).json()["results"] == []


def test_a_second_turn_can_be_edited(api, demo_conversation):
    scripted_turn(demo_conversation)
    scripted_turn(demo_conversation, content="And tomorrow?")
    response = api.post(
        _url(demo_conversation, "messages/5/edit/"), {"content": "And next week?"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["conversation"]["forked_at_position"] == 4


@pytest.mark.parametrize(
    ("tail", "body"),
    [("messages/0/edit/", {"content": "Hello there"}), ("regenerate/", None)],
)
def test_a_used_up_budget_refuses_edit_and_regenerate_before_any_branch(
    api, history, demo_conversation, user, tail, body
):
    budget = Budget.objects.create(
        name="daily", scope="user", user=user, period="day", token_limit=1
    )
    start, _end = period_bounds(period="day", at=timezone.now())
    BudgetCounter.objects.create(budget=budget, period_start=start, tokens=5)
    runs = Run.objects.count()
    response = api.post(_url(demo_conversation, tail), body, format="json")
    assert response.status_code == 429
    assert response.json()["code"] == "budget_exceeded"
    assert int(response["Retry-After"]) > 0
    assert Conversation.objects.count() == 1  # no branch was made
    assert Run.objects.count() == runs


@pytest.mark.parametrize(
    ("tail", "body"),
    [("messages/0/edit/", {"content": "Hello there"}), ("regenerate/", None)],
)
def test_edit_and_regenerate_without_a_free_stream_slot_refuse_before_any_branch(
    api, history, demo_conversation, user, settings, tail, body
):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_STREAMS_PER_USER": 1}
    cache.clear()
    held = acquire_stream_slot(user_id=user.pk, lifetime=60)
    assert held is not None  # the user's one slot, taken by another stream
    try:
        for _attempt in range(2):  # a client retrying makes nothing either
            response = api.post(
                _url(demo_conversation, tail), body, format="json", HTTP_ACCEPT="text/event-stream"
            )
            assert response.status_code == 429
            assert response.json()["code"] == "too_many_streams"
        assert Conversation.objects.count() == 1  # no branch was made
    finally:
        release_stream_slot(held)
