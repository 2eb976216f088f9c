"""HTTP promises every route keeps: OPTIONS and HEAD, JSON 404s under the mount, Location on 201."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings
from django.urls import URLPattern, reverse
from rest_framework.test import APIClient

from conversations.api import urls as api_urls
from conversations.services import store_attachment

pytestmark = pytest.mark.django_db

NOBODY = uuid.UUID("00000000-0000-4000-8000-000000000000")  # no conversation has it

ROUTES = [
    pattern
    for pattern in api_urls.urlpatterns
    if isinstance(pattern, URLPattern) and pattern.name != "not-found"
]


def route_url(pattern: URLPattern, ids: dict[str, str]) -> str:
    """The route's URL, its path parameters taken from ``ids`` (the caller's own objects)."""
    kwargs = {name: ids[name] for name in pattern.pattern.converters}
    return reverse(f"conversations:{pattern.name}", kwargs=kwargs)


@pytest.fixture
def own_ids(history, demo_conversation, settings, tmp_path) -> dict[str, str]:
    call = demo_conversation.tool_calls.first()
    settings.MEDIA_ROOT = str(tmp_path)
    attachment = store_attachment(owner=demo_conversation.owner, file=b"notes\n", name="a.txt")
    return {
        "attachment_id": str(attachment.attachment.pk),
        "conversation_id": str(demo_conversation.pk),
        "run_id": str(history.pk),
        "tool_call_id": str(call.pk),
        "position": "0",
    }


def test_the_routes_cover_the_whole_api():
    assert len(ROUTES) == 35
    assert {p.name for p in ROUTES} >= {
        "conversation-list",
        "conversation-import",
        "docs",
        "output-list",
        "output-schema-list",
        "message-feedback",
        "tool-call-feedback",
        "run-feedback",
        "run-scores",
        "dataset-export",
    }


@pytest.mark.parametrize("method", ["options", "head"])
@pytest.mark.parametrize("who", ["authenticated", "anonymous"])
@pytest.mark.parametrize("pattern", ROUTES, ids=lambda p: p.name)
def test_every_route_answers_options_and_head_without_a_server_error(
    api, anonymous, own_ids, pattern, who, method
):
    client = api if who == "authenticated" else anonymous
    response = getattr(client, method)(route_url(pattern, own_ids))
    assert response.status_code < 500, (pattern.name, response.content[:300])


@pytest.mark.parametrize(
    ("name", "methods"),
    [
        ("conversation-list", {"GET", "HEAD", "POST", "OPTIONS"}),
        ("conversation-messages", {"GET", "HEAD", "POST", "OPTIONS"}),
        ("conversation-import", {"POST", "OPTIONS"}),
    ],
)
def test_options_describes_the_view_and_its_methods(api, own_ids, name, methods):
    pattern = next(p for p in ROUTES if p.name == name)
    response = api.options(route_url(pattern, own_ids))
    assert response.status_code == 200
    assert set(response.headers["Allow"].replace(" ", "").split(",")) == methods
    body = response.json()
    assert body["renders"] == ["application/json"] and body["parses"] == ["application/json"]
    assert body["name"]


def test_the_docs_page_describes_itself_as_json(anonymous):
    response = anonymous.options(reverse("conversations:docs"))
    assert response.status_code == 200
    assert response.json()["renders"] == ["text/html"]
    assert "GET" in response.headers["Allow"]


def test_head_is_get_without_a_body(api, demo_conversation):
    url = reverse("conversations:conversation-detail", args=[demo_conversation.pk])
    response = api.head(url)
    assert response.status_code == 200
    assert response.content == b""
    assert response.headers["Content-Type"] == "application/json"


# JSON 404s under the mount -------------------------------------------------------------------

NOT_FOUND = {"code": "not_found", "detail": "Not found.", "errors": []}


def assert_json_404(response) -> dict:
    assert response.status_code == 404
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"code", "detail", "errors"}
    assert body["code"] == "not_found"
    return body


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("method", ["get", "post", "patch", "delete", "options", "head"])
@pytest.mark.parametrize(
    "path",
    [
        "/api/",
        "/api/nope/",
        "/api/conversations/not-a-uuid/",
        "/api/conversations/not-a-uuid/messages/",
        # A fixed id: a parameter drawn at import would differ between the
        # pytest-xdist workers, which must all collect the same test ids.
        f"/api/conversations/{NOBODY}/nope/",
        "/api/runs/123/cancel/",
    ],
)
@pytest.mark.parametrize("who", ["authenticated", "anonymous"])
def test_a_path_that_names_nothing_is_the_json_404(api, anonymous, who, path, method, debug):
    client = api if who == "authenticated" else anonymous
    with override_settings(DEBUG=debug):
        response = getattr(client, method)(path)
    if method == "head":
        assert response.status_code == 404 and response.content == b""
    else:
        assert assert_json_404(response) == NOT_FOUND


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize(
    ("path", "meant"),
    [
        ("/api/conversations", "/api/conversations/"),
        ("/api/conversations/import", "/api/conversations/import/"),
        ("/api/schema", "/api/schema/"),
    ],
)
def test_a_missing_trailing_slash_is_a_json_404_naming_the_url(api, path, meant, method, debug):
    with override_settings(DEBUG=debug):
        response = getattr(api, method)(path)
    body = assert_json_404(response)
    assert body["detail"].endswith(f"ends with a slash: {meant}")


def test_the_suggested_url_keeps_the_query_and_the_mount(api, demo_conversation):
    path = f"/api/conversations/{demo_conversation.pk}/messages"
    body = assert_json_404(api.get(path, {"after": "3"}))
    assert body["detail"].endswith(f"{path}/?after=3")


def test_a_missing_slash_on_a_path_that_names_nothing_gets_no_suggestion(api):
    assert assert_json_404(api.get("/api/conversations/not-a-uuid")) == NOT_FOUND


def test_an_unsafe_method_needs_no_csrf_token_to_learn_the_path_is_unknown(user):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    assert_json_404(client.post("/api/nope/", {"a": 1}, format="json"))


# Location on 201 ----------------------------------------------------------------------------


def test_creating_a_conversation_answers_its_location(api, profile):
    response = api.post(reverse("conversations:conversation-list"), {}, format="json")
    assert response.status_code == 201
    detail = reverse("conversations:conversation-detail", args=[response.json()["id"]])
    assert response.headers["Location"] == f"http://testserver{detail}"
    assert api.get(response.headers["Location"]).json()["id"] == response.json()["id"]


def test_importing_a_conversation_answers_its_location(api, profile):
    body = {"messages": [{"role": "user", "content": "Hi"}]}
    response = api.post(reverse("conversations:conversation-import"), body, format="json")
    assert response.status_code == 201
    detail = reverse("conversations:conversation-detail", args=[response.json()["id"]])
    assert response.headers["Location"] == f"http://testserver{detail}"


def test_a_finished_run_answers_its_location(api, demo_conversation):
    url = reverse("conversations:conversation-messages", args=[demo_conversation.pk])
    response = api.post(url, {"content": "What time is it?"}, format="json")
    assert response.status_code == 201
    run = reverse("conversations:run-detail", args=[response.json()["run"]["id"]])
    assert response.headers["Location"] == f"http://testserver{run}"
    assert api.get(response.headers["Location"]).json()["status"] == "completed"


def test_updates_and_reads_carry_no_location(api, demo_conversation):
    url = reverse("conversations:conversation-detail", args=[demo_conversation.pk])
    assert "Location" not in api.get(url).headers
    assert "Location" not in api.patch(url, {"title": "x"}, format="json").headers
