"""Hostile input at the API boundary: unstorable import values and deep JSON are 400s."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from conversations.domain.storable import MAX_NAME_LENGTH
from conversations.models import Conversation, Message, ToolCall

pytestmark = pytest.mark.django_db

IMPORT = reverse("conversations:conversation-import")
LIST = reverse("conversations:conversation-list")


def history(call_id="call_1", name="get_weather", arguments='{"city":"Paris"}'):
    return [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "18"},
    ]


def post_raw(api, url, text):
    return api.generic("POST", url, text.encode("utf-8", "surrogatepass"), "application/json")


def assert_refused(response, code, pointer):
    assert response.status_code == 400, response.content
    assert response["content-type"] == "application/json"
    body = response.json()
    assert body["errors"][0]["code"] == code
    assert body["errors"][0]["pointer"] == pointer
    assert Conversation.objects.count() == 0
    assert Message.objects.count() == 0


ARGUMENTS = "/messages/1/tool_calls/0/function/arguments"


@pytest.mark.parametrize(
    ("arguments", "code", "pointer"),
    [
        ('{"city": "a\\u0000b"}', "null_characters_not_allowed", f"{ARGUMENTS}/city"),
        ('{"city": "a\\ud800b"}', "surrogate_characters_not_allowed", f"{ARGUMENTS}/city"),
        ('{"\\u0000": 1}', "null_characters_not_allowed", f"{ARGUMENTS}/\x00"),
    ],
)
def test_import_refuses_arguments_the_store_cannot_hold(api, arguments, code, pointer):
    response = api.post(IMPORT, {"messages": history(arguments=arguments)}, format="json")
    assert_refused(response, code, pointer)


@pytest.mark.parametrize(
    ("fields", "pointer"),
    [
        ({"call_id": "c" * (MAX_NAME_LENGTH + 1)}, "/messages/1/tool_calls/0/id"),
        ({"name": "n" * (MAX_NAME_LENGTH + 1)}, "/messages/1/tool_calls/0/function/name"),
    ],
)
def test_import_refuses_ids_and_names_longer_than_stored(api, fields, pointer):
    response = api.post(IMPORT, {"messages": history(**fields)}, format="json")
    assert_refused(response, "too_long", pointer)


def test_import_refuses_argument_text_nested_past_the_limit(api, settings):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_JSON_DEPTH": 10}
    deep = '{"a": ' + "[" * 20 + "]" * 20 + "}"
    response = api.post(IMPORT, {"messages": history(arguments=deep)}, format="json")
    assert_refused(response, "too_deep", ARGUMENTS)


def test_a_nul_key_in_the_body_is_refused_with_its_pointer(api):
    text = json.dumps({"messages": history(arguments={"\x00": 1})})
    response = post_raw(api, IMPORT, text)
    assert_refused(response, "null_characters_not_allowed", f"{ARGUMENTS}/\x00")


@pytest.mark.parametrize("depth", [65, 950, 100_000])
@pytest.mark.parametrize("url", [IMPORT, LIST])
def test_deep_bodies_are_refused_before_parsing(api, url, depth):
    text = '{"metadata": {"x": ' + "[" * depth + "]" * depth + "}}"
    response = post_raw(api, url, text)
    assert_refused(response, "too_deep", "/metadata/x" + "/0" * 62)


def test_the_depth_limit_is_a_setting(api, settings):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_JSON_DEPTH": 2}
    response = post_raw(api, LIST, '{"metadata": {"a": {"b": 1}}}')
    assert_refused(response, "too_deep", "/metadata/a")
    response = post_raw(api, LIST, '{"metadata": {"a": 1}}')
    assert response.status_code == 201


def test_imported_calls_with_their_results_are_answered_not_pending(api):
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "ok", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "bad", "type": "function", "function": {"name": "b", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "ok", "content": "18"},
        {"role": "tool", "tool_call_id": "bad", "content": "no such city", "is_error": True},
    ]
    response = api.post(IMPORT, {"messages": messages}, format="json")
    assert response.status_code == 201, response.content
    statuses = dict(ToolCall.objects.values_list("call_id", "status"))
    assert statuses == {"ok": ToolCall.Status.SUCCEEDED, "bad": ToolCall.Status.FAILED}
