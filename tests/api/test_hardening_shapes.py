"""Every failure answers in the API's JSON error shape, with the documented status."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

LIST = reverse("conversations:conversation-list")
IMPORT = reverse("conversations:conversation-import")


def json_error(response, status, code):
    assert response.status_code == status, response.content[:300]
    assert response["content-type"] == "application/json"
    assert response.json()["code"] == code


@pytest.mark.parametrize("url", [LIST, IMPORT])
def test_a_body_over_the_upload_limit_is_a_json_413(api, url, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = b'{"title": "' + b"x" * 20_000 + b'"}'
    response = api.generic("POST", url, body, "application/json")
    json_error(response, 413, "content_too_large")


def test_oversize_message_content_over_the_upload_limit_is_the_documented_413(
    api, demo_conversation, settings
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    url = reverse("conversations:conversation-messages", args=[demo_conversation.pk])
    body = b'{"content": "' + b"x" * 20_000 + b'"}'
    json_error(api.generic("POST", url, body, "application/json"), 413, "content_too_large")


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_writing_to_the_events_url_is_a_json_405_even_with_csrf_checks(user, method):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    url = reverse("conversations:run-events", args=["00000000-0000-0000-0000-000000000000"])
    response = getattr(client, method)(url, "{}", content_type="application/json")
    json_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET"
