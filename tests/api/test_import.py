"""Import: the OpenAI wire shape in, validated by the domain, all or nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations.models import Conversation, Message, ToolCall

pytestmark = pytest.mark.django_db

IMPORT = reverse("conversations:conversation-import")


def call(call_id="call_1", name="get_weather", arguments='{"city":"Paris"}'):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


USER = {"role": "user", "content": "Weather in Paris?"}
CALLING = {"role": "assistant", "content": None, "tool_calls": [call()]}
ANSWER = {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 18}'}
FINAL = {"role": "assistant", "content": "18 degrees."}


def test_import_saves_the_history(api, user, profile):
    body = {
        "title": "Imported",
        "profile": "demo",
        "metadata": {"source": "test"},
        "messages": [
            {"role": "system", "content": "Be brief."},
            USER,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call(), call("call_2", "get_current_time", "")],
            },
            ANSWER,
            {"role": "tool", "tool_call_id": "call_2", "content": "noon"},
            FINAL,
        ],
    }
    response = api.post(IMPORT, body, format="json")
    assert response.status_code == 201
    data = response.json()
    assert data["title"] == "Imported" and data["profile"] == "demo"
    assert data["metadata"] == {"source": "test"} and data["message_count"] == 6
    conversation = Conversation.objects.get(pk=data["id"])
    assert conversation.owner == user
    messages = api.get(
        reverse("conversations:conversation-messages", args=[conversation.pk])
    ).json()["results"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    calls = messages[2]["tool_calls"]
    assert [(c["id"], c["arguments"]) for c in calls] == [
        ("call_1", {"city": "Paris"}),
        ("call_2", {}),
    ]
    assert messages[4]["tool_call_id"] == "call_2"
    # The export gives the same wire array back (after the profile's system prompt).
    export = api.get(
        reverse("conversations:conversation-export", args=[conversation.pk]) + "?format=openai"
    ).json()
    assert export["messages"][1:] == [
        {"role": "system", "content": "Be brief."},
        USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call(), call("call_2", "get_current_time", "{}")],
        },
        ANSWER,
        {"role": "tool", "tool_call_id": "call_2", "content": "noon"},
        FINAL,
    ]


def test_arguments_may_be_an_object_and_bad_text_is_kept_raw(api):
    messages = [
        USER,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call(arguments={"city": "Paris"}), call("call_2", arguments="{oops")],
        },
        ANSWER,
        {"role": "tool", "tool_call_id": "call_2", "content": "error"},
    ]
    response = api.post(IMPORT, {"messages": messages}, format="json")
    assert response.status_code == 201
    raw = ToolCall.objects.get(call_id="call_2")
    assert raw.arguments == {} and raw.raw_arguments == "{oops"


# Every invalid shape of the domain, and the pairing rules: code and pointer, nothing saved.
INVALID = [
    ("missing_role", [{"content": "hi"}], "/messages/0/role"),
    ("missing_role", [USER, {"role": 3, "content": "x"}], "/messages/1/role"),
    ("invalid_role", [{"role": "robot", "content": "hi"}], "/messages/0/role"),
    (
        "invalid_tool_calls",
        [USER, {"role": "assistant", "content": "", "tool_calls": {"id": "x"}}],
        "/messages/1/tool_calls",
    ),
    (
        "empty_tool_calls",
        [USER, {"role": "assistant", "content": "", "tool_calls": []}],
        "/messages/1/tool_calls",
    ),
    (
        "invalid_tool_call",
        [USER, {"role": "assistant", "content": "", "tool_calls": [call(), "call_2"]}],
        "/messages/1/tool_calls/1",
    ),
    (
        "tool_calls_not_allowed",
        [{"role": "user", "content": "hi", "tool_calls": [call()]}],
        "/messages/0/tool_calls",
    ),
    (
        "tool_call_id_not_allowed",
        [{"role": "user", "content": "hi", "tool_call_id": "call_1"}],
        "/messages/0/tool_call_id",
    ),
    (
        "empty_tool_call_id",
        [USER, CALLING, {**ANSWER, "tool_call_id": ""}],
        "/messages/2/tool_call_id",
    ),
    (
        "empty_tool_call_id",
        [USER, {"role": "assistant", "content": "", "tool_calls": [call(call_id="")]}],
        "/messages/1/tool_calls/0/id",
    ),
    (
        "invalid_tool_call_id",
        [USER, CALLING, {**ANSWER, "tool_call_id": 7}],
        "/messages/2/tool_call_id",
    ),
    ("invalid_content", [{"role": "user", "content": 42}], "/messages/0/content"),
    ("invalid_content", [{"role": "user"}], "/messages/0/content"),
    (
        "invalid_arguments",
        [USER, {"role": "assistant", "content": "", "tool_calls": [call(arguments=[1, 2])]}],
        "/messages/1/tool_calls/0/function/arguments",
    ),
    (
        "empty_tool_name",
        [USER, {"role": "assistant", "content": "", "tool_calls": [call(name="")]}],
        "/messages/1/tool_calls/0/function/name",
    ),
    ("invalid_message", [USER, "hello"], "/messages/1"),
    # Pairing rules (append_messages) and the import's own "everything answered".
    ("unknown_tool_call_id", [USER, ANSWER], "/messages/1/tool_call_id"),
    (
        "unknown_tool_call_id",
        [USER, CALLING, ANSWER, {**ANSWER, "content": "again"}],
        "/messages/3/tool_call_id",
    ),
    (
        "missing_tool_call_id",
        [USER, CALLING, {"role": "tool", "content": "x"}],
        "/messages/2/tool_call_id",
    ),
    ("unanswered_tool_calls", [USER, CALLING, FINAL], "/messages/2"),
    ("invalid_is_error", [USER, CALLING, {**ANSWER, "is_error": "yes"}], "/messages/2/is_error"),
    ("is_error_not_allowed", [{**USER, "is_error": True}], "/messages/0/is_error"),
    ("unanswered_tool_calls", [USER, CALLING], "/messages/1/tool_calls/0"),
    (
        "unanswered_tool_calls",
        [
            USER,
            {"role": "assistant", "content": "", "tool_calls": [call(), call("call_2")]},
            ANSWER,
        ],
        "/messages/1/tool_calls/1",
    ),
    (
        "duplicate_tool_call_id",
        [USER, CALLING, ANSWER, CALLING, ANSWER],
        "/messages/3/tool_calls/0/id",
    ),
    (
        "duplicate_tool_call_id",
        [USER, {"role": "assistant", "content": "", "tool_calls": [call(), call()]}],
        "/messages/1/tool_calls/1/id",
    ),
]


@pytest.mark.parametrize(
    ("code", "messages", "pointer"),
    INVALID,
    ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(INVALID)],
)
def test_each_invalid_shape_is_400_with_code_and_pointer_and_saves_nothing(
    api, code, messages, pointer
):
    response = api.post(IMPORT, {"title": "Broken", "messages": messages}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == code
    assert [(e["pointer"], e["code"]) for e in body["errors"]] == [(pointer, code)]
    assert body["detail"] == f'Field "{pointer[1:]}": ' + body["errors"][0]["detail"]
    assert not Conversation.objects.exists()
    assert not Message.objects.exists()
    assert not ToolCall.objects.exists()


@pytest.mark.parametrize(
    ("body", "pointer", "code"),
    [
        ({}, "/messages", "required"),
        ({"messages": {"role": "user"}}, "/messages", "not_a_list"),
        ({"messages": [USER] * 1001}, "/messages", "max_length"),
        (
            {"messages": [{"role": "user", "content": "a\x00"}]},
            "/messages/0/content",
            "null_characters_not_allowed",
        ),
        ({"messages": [USER], "profile": "missing"}, "/profile", "does_not_exist"),
        ({"messages": [USER], "title": "t" * 201}, "/title", "max_length"),
        ({"messages": [USER], "metadata": []}, "/metadata", "not_an_object"),
    ],
)
def test_the_envelope_is_validated(api, body, pointer, code):
    response = api.post(IMPORT, body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert [(e["pointer"], e["code"]) for e in response.json()["errors"]] == [(pointer, code)]
    assert not Conversation.objects.exists()


def test_a_thousand_messages_are_accepted(api):
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(1000)
    ]
    response = api.post(IMPORT, {"messages": messages}, format="json")
    assert response.status_code == 201
    assert response.json()["message_count"] == 1000


def test_an_error_result_keeps_its_flag_through_import_and_the_message_list(api):
    failed = {**ANSWER, "content": 'Error: tool "get_weather" failed.', "is_error": True}
    response = api.post(
        IMPORT, {"title": "Failed", "messages": [USER, CALLING, failed, FINAL]}, format="json"
    )
    assert response.status_code == 201, response.json()
    messages = api.get(
        reverse("conversations:conversation-messages", args=[response.json()["id"]])
    ).json()["results"]
    assert [(m["role"], m["is_error"]) for m in messages] == [
        ("user", False),
        ("assistant", False),
        ("tool", True),
        ("assistant", False),
    ]


def test_an_empty_history_imports_as_an_empty_conversation(api, profile):
    # What the export writes for a conversation without messages must import again.
    response = api.post(IMPORT, {"title": "Nothing yet", "messages": []}, format="json")
    assert response.status_code == 201, response.content
    conversation = Conversation.objects.get(pk=response.json()["id"])
    assert conversation.title == "Nothing yet" and not conversation.messages.exists()
