"""Every route and method, with arbitrary bodies (deep, huge, not JSON): no 5xx, no HTML."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token

from .conftest import scripted_turn

pytestmark = pytest.mark.django_db

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
ROUTES = [
    "conversations/",
    "conversations/import/",
    "conversations/{conversation}/",
    "conversations/{conversation}/messages/",
    "conversations/{conversation}/runs/",
    "conversations/{conversation}/export/",
    "runs/{run}/",
    "runs/{run}/cancel/",
    "runs/{run}/events/",
    "tools/",
    "profiles/",
    "schema/",
    "docs/",
    "no/such/route/",
    "conversations/not-a-uuid/",
]

text = st.text(
    st.characters(exclude_categories=()) | st.sampled_from(["\x00", "\ud800"]), max_size=30
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=20,
)
keys = st.sampled_from(["title", "content", "messages", "metadata", "profile", "x"])


def nested(depth: int, opener: str) -> bytes:
    closer = "]" if opener == "[" else "}"
    inner = '"a":' if opener == "{" else ""
    return ('{"metadata": ' + (opener + inner) * depth + "1" + closer * depth + "}").encode()


bodies = st.one_of(
    st.none(),
    st.dictionaries(keys, json_values, max_size=4).map(
        lambda v: json.dumps(v).encode("utf-8", "surrogatepass")
    ),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(nested, st.sampled_from([63, 64, 65, 200, 950, 5_000]), st.sampled_from("[{")),
    st.sampled_from([b'{"content": "' + b"x" * 3_000_000 + b'"}', b"x" * 3_000_000]),
    st.binary(max_size=200),
)
content_types = st.sampled_from(["application/json", "text/plain", "multipart/form-data"])


@pytest.fixture
def targets(user, demo_conversation):
    run = scripted_turn(demo_conversation)
    token = Token.objects.create(user=user)
    return {"conversation": demo_conversation.pk, "run": run.pk, "token": token.key}


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    route=st.sampled_from(ROUTES),
    method=st.sampled_from(METHODS),
    body=bodies,
    content_type=content_types,
    foreign=st.booleans(),
    authenticated=st.booleans(),
)
def test_no_route_answers_5xx_or_html(
    targets, settings, route, method, body, content_type, foreign, authenticated
):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None}
    ids = {"conversation": uuid.uuid4(), "run": uuid.uuid4()} if foreign else targets
    url = "/api/" + route.format(conversation=ids["conversation"], run=ids["run"])
    headers = {"Authorization": f"Token {targets['token']}"} if authenticated else {}
    client = Client(raise_request_exception=False)
    response = client.generic(method, url, body or b"", content_type=content_type, headers=headers)
    assert response.status_code < 500, (method, url, response.status_code)
    if route in ("docs/",) and response.status_code == 200:
        return  # the API's documentation page is HTML on purpose
    assert "html" not in response.get("content-type", ""), (method, url, response.status_code)
    if response.streaming:
        # An event stream of a finished run ends by itself.
        b"".join(response.streaming_content)
