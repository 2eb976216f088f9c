"""The dataset export over the API: streamed JSON Lines of the caller's conversations."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from conversations.models import Conversation, Message
from conversations.services.feedback import set_feedback

from ..finetuning_format import check_chat_line
from .conftest import scripted_turn

pytestmark = pytest.mark.django_db

URL = reverse("conversations:dataset-export")


def read(response):
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/jsonl"
    return [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]


@pytest.fixture
def rated(user, other_user, profile):
    made = []
    for owner in (user, other_user):
        conversation = Conversation.objects.create(owner=owner, profile=profile)
        scripted_turn(conversation)
        answer = Message.objects.filter(conversation=conversation, role="assistant").last()
        set_feedback(user=owner, target=answer, value=1)
        made.append(conversation)
    return made


def test_the_caller_gets_their_own_conversations_as_valid_chat_lines(api, rated):
    lines = read(api.get(URL, {"format": "openai-chat", "rated": "up"}))
    assert len(lines) == 1
    check_chat_line(lines[0])
    mine = read(api.get(URL, {"format": "jsonl"}))
    assert [line["conversation"] for line in mine] == [str(rated[0].pk)]


def test_staff_get_everyones_with_all(django_user_model, rated):
    staff = APIClient()
    staff.force_authenticate(django_user_model.objects.create_user("ops", is_staff=True))
    assert read(staff.get(URL, {"format": "jsonl"})) == []
    everyone = read(staff.get(URL, {"format": "jsonl", "all": "1"}))
    assert {line["conversation"] for line in everyone} == {str(c.pk) for c in rated}


def test_everyones_is_refused_to_others(api, rated):
    response = api.get(URL, {"all": "1"})
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ({"format": "csv"}, "format"),
        ({"rated": "sideways"}, "rated"),
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-13-01"}, "to"),
    ],
)
def test_a_bad_parameter_is_named(api, query, parameter):
    response = api.get(URL, query)
    assert response.status_code == 400
    assert [item["parameter"] for item in response.json()["errors"]] == [parameter]


def test_the_date_filters_are_whole_days(api, rated):
    day = rated[0].created_at.date().isoformat()
    assert len(read(api.get(URL, {"format": "jsonl", "from": day, "to": day}))) == 1
    assert read(api.get(URL, {"format": "jsonl", "to": "2000-01-01"})) == []


def test_anonymous_callers_get_nothing(anonymous, rated):
    assert anonymous.get(URL).status_code in (401, 403)
