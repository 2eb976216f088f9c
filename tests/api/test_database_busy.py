"""A connection pool with no connection free: 503 ``service_unavailable``, never a 500.

These run on PostgreSQL behind a real psycopg pool of one connection (the
``small_pool`` fixture) that another thread holds, so the request waits for
the pool's timeout and gets what Django really raises: its own
``OperationalError`` raised from ``psycopg_pool.PoolTimeout``.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import OperationalError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from conversations.api.errors import exception_handler
from conversations.database import RETRY_AFTER_SECONDS
from conversations.models import Message, Run

pytestmark = pytest.mark.postgres


def assert_busy(response):
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    body = response.json()
    assert body["code"] == "service_unavailable"
    assert body["detail"] and body["errors"] == []


def test_a_posted_message_is_503_and_stores_nothing_while_the_pool_is_empty(
    held_connection, user, demo_conversation
):
    client = APIClient()
    client.force_authenticate(user)
    url = f"/api/conversations/{demo_conversation.pk}/messages/"

    with held_connection():
        response = client.post(url, {"content": "Hello"}, format="json")

    assert_busy(response)
    assert not Message.objects.filter(conversation=demo_conversation).exists()
    assert not Run.objects.filter(conversation=demo_conversation).exists()
    # The connection is back: the same request now goes through, once.
    response = client.post(url, {"content": "Hello"}, format="json")
    assert response.status_code == 201, response.content
    assert Run.objects.filter(conversation=demo_conversation).count() == 1


def test_token_authentication_itself_waiting_for_a_connection_is_503(held_connection, user):
    token = Token.objects.create(user=user)
    client = APIClient(HTTP_AUTHORIZATION=f"Token {token.key}")

    with held_connection():
        response = client.get("/api/conversations/")

    assert_busy(response)


def test_the_event_stream_view_answers_the_same_503(held_connection, user):
    token = Token.objects.create(user=user)
    client = APIClient(HTTP_AUTHORIZATION=f"Token {token.key}")

    with held_connection():
        # Authenticating the token is the first query: no run needs to exist.
        response = client.get(f"/api/runs/{uuid.uuid4()}/events/")

    assert_busy(response)


def test_other_database_errors_are_not_turned_into_503():
    assert exception_handler(OperationalError("server closed the connection"), {}) is None
