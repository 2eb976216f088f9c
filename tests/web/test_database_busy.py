"""Pages while the connection pool has no connection free: a plain 503, not a 500."""

from __future__ import annotations

import pytest

from conversations.database import RETRY_AFTER_SECONDS

pytestmark = pytest.mark.postgres


def test_the_chat_page_is_a_plain_503_with_retry_after(held_connection, client, user):
    client.force_login(user)

    with held_connection():
        # Loading the session is the first query.
        response = client.get("/chat/")

    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/plain")
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert client.get("/chat/").status_code == 200


def test_the_admin_too(held_connection, admin_client):
    with held_connection():
        response = admin_client.get("/admin/")

    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
