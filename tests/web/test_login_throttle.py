"""Wrong passwords on the chat's login page are throttled per username and per client address."""

from __future__ import annotations

import pytest
from django.core.cache import cache

pytestmark = pytest.mark.django_db

LOGIN = "/chat/login/"


@pytest.fixture(autouse=True)
def fresh_counts(settings):
    settings.CONVERSATIONS = {"LOGIN_FAILURE_LIMIT": 3, "LOGIN_FAILURE_WINDOW_SECONDS": 600}
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="bob-password")


def log_in(client, username, password, address="10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def assert_throttled(response):
    assert response.status_code == 429
    assert response["Retry-After"] == "600"
    assert "Too many failed logins. Try again in 10 minutes." in response.content.decode()
    assert "_auth_user_id" not in response.wsgi_request.session


def test_past_the_limit_even_the_right_password_is_refused_with_429(client, bob):
    for _ in range(3):
        response = log_in(client, "bob", "wrong")
        assert response.status_code == 200  # the form again, with Django's message

    assert_throttled(log_in(client, "bob", "bob-password"))


def test_failures_for_one_username_count_from_every_address(client, bob):
    for index in range(3):
        log_in(client, "bob", "wrong", address=f"10.0.1.{index}")

    assert_throttled(log_in(client, "bob", "bob-password", address="10.0.2.1"))


def test_failures_from_one_address_count_for_every_username(client, bob):
    for name in ("ann", "carl", "dora"):
        log_in(client, name, "guess")

    assert_throttled(log_in(client, "bob", "bob-password"))
    # Another address is not held back by that one.
    assert log_in(client, "bob", "bob-password", address="10.9.9.9").status_code == 302


def test_a_successful_login_clears_its_usernames_failures(client, bob):
    for _ in range(2):
        log_in(client, "bob", "wrong", address="10.0.0.1")
    assert log_in(client, "bob", "bob-password", address="10.0.0.1").status_code == 302
    client.logout()

    for _ in range(2):
        log_in(client, "bob", "wrong", address="10.0.0.2")

    assert log_in(client, "bob", "bob-password", address="10.0.0.2").status_code == 302


def test_usernames_are_counted_whatever_their_case(client, bob):
    for index, name in enumerate(("BOB", "Bob ", "bob")):
        log_in(client, name, "wrong", address=f"10.0.3.{index}")

    assert_throttled(log_in(client, "bob", "bob-password", address="10.0.4.1"))
