"""A sweep of malformed paths, ids, methods and parameters under the mount: every error is compact JSON."""

from __future__ import annotations

import json
import uuid

import pytest

pytestmark = pytest.mark.django_db

UNKNOWN = uuid.UUID(int=7)

# (method, path) with ``{c}`` for one of the user's conversations and ``{r}`` for one of its runs.
SWEEP = [
    # paths that name nothing, or almost something
    ("get", "/api/nope"),
    ("get", "/api/nope/"),
    ("get", "/api/conversations"),
    ("post", "/api/conversations"),
    ("get", "/api/conversations/{c}/messages"),
    ("get", "/api/%00/"),
    ("get", "/api/conversations/%E2%80%AE/"),
    ("get", "/api/" + "x" * 3000 + "/"),
    # malformed and unknown ids
    ("get", "/api/conversations/not-a-uuid/"),
    ("get", "/api/conversations/{c}x/"),
    ("get", f"/api/conversations/{UNKNOWN}/"),
    ("delete", f"/api/conversations/{UNKNOWN}/"),
    ("get", f"/api/conversations/{UNKNOWN}/chat/"),
    ("get", "/api/runs/xyz/"),
    ("get", f"/api/runs/{UNKNOWN}/"),
    ("get", f"/api/runs/{UNKNOWN}/events/"),
    ("get", "/api/runs/xyz/events/"),
    ("post", "/api/tool-calls/0/approve/"),
    ("post", "/api/tool-calls/-1/approve/"),
    ("post", "/api/tool-calls/99999999999999999999/reject/"),
    ("post", "/api/tool-calls/9223372036854775807/approve/"),
    ("post", "/api/tool-calls/abc/reject/"),
    ("post", "/api/conversations/{c}/messages/99999999999999999999999/edit/"),
    ("post", "/api/conversations/{c}/messages/0x1/edit/"),
    # wrong methods
    ("delete", "/api/usage/"),
    ("put", "/api/approvals/"),
    ("patch", "/api/search/"),
    ("post", "/api/tools/"),
    ("delete", "/api/profiles/"),
    ("post", "/api/schema/"),
    ("post", "/api/docs/"),
    ("post", "/api/runs/{r}/events/"),
    ("put", "/api/runs/{r}/"),
    ("get", "/api/runs/{r}/cancel/"),
    ("get", "/api/conversations/import/"),
    ("put", "/api/conversations/{c}/messages/"),
    ("delete", "/api/conversations/{c}/chat/"),
    ("get", "/api/conversations/{c}/fork/"),
    ("get", "/api/conversations/{c}/export/?format=nope"),
    # bad parameters
    ("get", "/api/usage/?to=9999-12-31"),
    ("get", "/api/usage/?from=yesterday"),
    ("get", "/api/usage/?group_by=week"),
    ("get", "/api/search/"),
    ("get", "/api/search/?q=a&cursor=zz"),
    ("get", "/api/search/?q=a&page_size=0"),
    ("get", "/api/conversations/?cursor=zz"),
    ("get", "/api/conversations/{c}/messages/?cursor=zz"),
    ("get", "/api/conversations/{c}/chat/?cursor=zz"),
    ("get", "/api/approvals/?cursor=zz"),
    ("get", "/api/runs/{r}/events/?last_event_id=x"),
]


def assert_compact_error(response, where: str) -> None:
    assert not 200 <= response.status_code < 300, where
    assert response.status_code < 500, (where, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), where
    if response.request["REQUEST_METHOD"] == "HEAD":
        assert response.content == b"", where
        return
    text = response.content.decode()
    body = json.loads(text)
    # Compact: exactly the body spelled without a space or a newline between its tokens.
    assert text == json.dumps(body, separators=(",", ":"), ensure_ascii=False), (where, text[:300])
    assert set(body) >= {"code", "detail", "errors"}, (where, body)
    assert body["code"] and body["code"] == body["code"].strip(), where
    assert body["detail"][:1].isupper(), (where, body["detail"])
    for item in body["errors"]:
        assert item["detail"][:1].isupper(), (where, item)
        assert item["pointer"] is not None or item["parameter"] is not None, (where, item)


@pytest.fixture
def ids(history, demo_conversation) -> dict[str, str]:
    return {"c": str(demo_conversation.pk), "r": str(history.pk)}


@pytest.mark.parametrize(
    "accept", ["application/json", "application/json; indent=4", "text/html", "*/*"]
)
@pytest.mark.parametrize("who", ["owner", "anonymous"])
def test_every_error_of_the_sweep_is_compact_json_with_a_code(api, anonymous, ids, who, accept):
    client = api if who == "owner" else anonymous
    for method, template in SWEEP:
        path = template.format(**ids)
        response = getattr(client, method)(path, HTTP_ACCEPT=accept)
        assert_compact_error(response, f"{method.upper()} {path} as {who}, Accept: {accept}")


@pytest.mark.parametrize("method", ["head", "options", "trace", "connect", "propfind"])
def test_unusual_methods_on_malformed_paths_answer_compact_json(api, ids, method):
    for path in ("/api/nope/", "/api/conversations/not-a-uuid/", "/api/runs/xyz/events/"):
        response = api.generic(method.upper(), path)
        assert_compact_error(response, f"{method.upper()} {path}")


@pytest.mark.parametrize("method", ["trace", "propfind", "connect"])
def test_methods_no_route_takes_are_compact_405s(api, ids, method):
    for path in ("/api/conversations/", "/api/usage/", f"/api/runs/{ids['r']}/events/"):
        response = api.generic(method.upper(), path)
        assert response.status_code == 405, (path, response.content[:200])
        assert_compact_error(response, f"{method.upper()} {path}")


def test_compact_json_holds_whatever_the_hosts_drf_settings(api, settings):
    settings.REST_FRAMEWORK = {"COMPACT_JSON": False, "UNICODE_JSON": False}
    response = api.get("/api/usage/?to=9999-12-31", HTTP_ACCEPT="application/json; indent=2")
    assert_compact_error(response, "usage with a host that pretty-prints")


def test_an_unknown_profile_is_named_with_its_slug(api, profile):
    response = api.post("/api/conversations/", {"profile": "nope"}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["detail"] == 'Field "profile": No profile with slug "nope".'
    assert body["errors"][0]["detail"] == 'No profile with slug "nope".'
    assert body["errors"][0]["pointer"] == "/profile"


def test_a_single_problem_names_its_field_and_several_name_them_all(api):
    one = api.get("/api/usage/?group_by=week").json()
    assert one["detail"].startswith('Parameter "group_by": ')
    both = api.get("/api/usage/?group_by=week&from=yesterday").json()
    assert both["detail"] == 'The request is not valid: Parameter "group_by", Parameter "from".'
