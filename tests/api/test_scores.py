"""Scores over the API: written by staff and holders of ``conversations.add_score``, listed on the run."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from rest_framework.test import APIClient

from conversations.models import Score

pytestmark = pytest.mark.django_db


def scores_url(run):
    return reverse("conversations:run-scores", args=[run.pk])


@pytest.fixture
def scorer(django_user_model):
    """A user who is not staff but holds ``conversations.add_score``."""
    person = django_user_model.objects.create_user(username="grader")
    person.user_permissions.add(Permission.objects.get(codename="add_score"))
    client = APIClient()
    client.force_authenticate(person)
    return client


@pytest.fixture
def staff(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user(username="ops", is_staff=True))
    return client


@pytest.mark.parametrize(
    ("value", "column"),
    [(0.75, "value_number"), (3, "value_number"), (True, "value_bool"), ("good", "value_label")],
)
def test_a_holder_of_the_permission_scores_any_run(scorer, history, value, column):
    response = scorer.post(
        scores_url(history), {"name": "accuracy", "value": value, "comment": "ok"}, format="json"
    )
    assert response.status_code == 201, response.json()
    score = Score.objects.get()
    assert (score.run_id, score.name, score.source, score.comment) == (
        history.pk,
        "accuracy",
        "admin",
        "ok",
    )
    assert getattr(score, column) == value
    assert response.json()["value"] == value


def test_staff_score_and_the_owner_reads_the_scores_on_the_run(staff, api, history):
    staff.post(scores_url(history), {"name": "tone", "value": "friendly"}, format="json")
    staff.post(
        scores_url(history), {"name": "ok", "value": False, "source": "evaluator"}, format="json"
    )
    listed = api.get(scores_url(history)).json()
    assert [(s["name"], s["value"], s["source"], s["position"]) for s in listed] == [
        ("tone", "friendly", "admin", None),
        ("ok", False, "evaluator", None),
    ]


def test_the_owner_without_the_permission_may_not_score(api, history):
    response = api.post(scores_url(history), {"name": "self", "value": 1}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert not Score.objects.exists()


def test_anyone_else_gets_not_found(other_api, history):
    assert other_api.get(scores_url(history)).status_code == 404
    assert (
        other_api.post(scores_url(history), {"name": "x", "value": 1}, format="json").status_code
        == 404
    )


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"value": 1}, "/name"),
        ({"name": "", "value": 1}, "/name"),
        ({"name": "x"}, "/value"),
        ({"name": "x", "value": None}, "/value"),
        ({"name": "x", "value": [1]}, "/value"),
        ({"name": "x", "value": {"a": 1}}, "/value"),
        ({"name": "x", "value": ""}, "/value"),
        ({"name": "x", "value": 1, "source": "robot"}, "/source"),
    ],
)
def test_a_bad_score_names_its_field(scorer, history, body, pointer):
    response = scorer.post(scores_url(history), body, format="json")
    assert response.status_code == 400
    assert pointer in [item["pointer"] for item in response.json()["errors"]]
    assert not Score.objects.exists()
