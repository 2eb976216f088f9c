"""Query parameters at the edge of what Python and the databases hold: a 400 naming them, not a 500."""

from __future__ import annotations

import base64
import json

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

pytestmark = pytest.mark.django_db

USAGE_URL = reverse("conversations:usage")
SEARCH_URL = reverse("conversations:search")


def forged_cursor(offset: object) -> str:
    """A search cursor as the API spells one, with any offset in it."""
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def assert_names_the_parameter(response, parameter: str) -> dict:
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert [item["parameter"] for item in body["errors"]] == [parameter]
    assert f'"{parameter}"' in body["detail"]
    return body


@pytest.fixture
def auditor(user):
    """``user`` with the permission to read everyone's usage."""
    user.user_permissions.add(Permission.objects.get(codename="view_all_usage"))
    return user


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"to": "9999-12-31"}, "to"),
        ({"from": "9999-12-31", "to": "2026-01-01"}, "from"),
        ({"from": "9999-12-31"}, "from"),
    ],
)
def test_usage_days_at_the_ends_of_the_calendar_are_refused_by_name(api, params, parameter):
    assert_names_the_parameter(api.get(USAGE_URL, params), parameter)


def test_usage_days_just_inside_the_calendar_are_answered(api):
    response = api.get(USAGE_URL, {"from": "0001-01-01", "to": "9999-12-30"})
    assert response.status_code == 200
    assert response.json()["total"]["calls"] == 0


def test_the_default_window_stops_at_the_calendars_first_day(api):
    # Without ``from`` the window starts thirty days before ``to``, if there are such days.
    response = api.get(USAGE_URL, {"to": "0001-01-05"})
    assert response.status_code == 200
    assert response.json()["from"] == "0001-01-01"


@pytest.mark.parametrize(
    "asked",
    [
        "\u0661\u0662",  # Arabic-Indic digits: isdigit() is true, and int() reads them
        "\u00b2",  # a superscript two: isdigit() is true, int() refuses it
        "\u0967",  # a Devanagari one
        "12\u200b",  # a zero-width space after ASCII digits
        "9" * 30,  # more digits than any primary key holds
        "-1",
    ],
)
def test_another_users_id_must_be_ascii_digits(api, auditor, asked):
    body = assert_names_the_parameter(api.get(USAGE_URL, {"user": asked}), "user")
    assert body["code"] == "invalid"


def test_an_id_of_no_user_is_refused_by_name_whatever_its_size(api, auditor):
    for asked in ("999999", "9" * 18):
        body = assert_names_the_parameter(api.get(USAGE_URL, {"user": asked}), "user")
        assert body["detail"].endswith(f"No user with id {asked}.")


def test_a_user_named_by_ascii_digits_is_still_found(api, auditor, other_user):
    response = api.get(USAGE_URL, {"user": str(other_user.pk)})
    assert response.status_code == 200 and response.json()["user"] == str(other_user.pk)


@pytest.mark.parametrize("offset", [2**63, 2**63 - 1, 2**64 + 5, 10**40])
def test_a_forged_search_cursor_past_any_row_is_an_invalid_cursor(api, demo_conversation, offset):
    response = api.get(SEARCH_URL, {"q": "hello", "cursor": forged_cursor(offset)})
    body = assert_names_the_parameter(response, "cursor")
    assert body["code"] == "invalid_cursor"


def test_a_search_cursor_far_past_the_results_is_an_empty_page(api, demo_conversation):
    response = api.get(SEARCH_URL, {"q": "hello", "cursor": forged_cursor(10**9)})
    assert response.status_code == 200
    assert response.json()["results"] == []
