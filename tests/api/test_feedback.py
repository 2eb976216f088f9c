"""Feedback over the API: upserted per user and target, removed, owned, answers only."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from conversations import domain
from conversations.models import Conversation, Feedback, Message, Run, ToolCall
from conversations.services import append_messages

from .conftest import scripted_turn
from .test_ai_sdk import chat_url
from .test_events import read

pytestmark = pytest.mark.django_db


def message_url(conversation, position):
    return reverse("conversations:message-feedback", args=[conversation.pk, position])


def call_url(call):
    return reverse("conversations:tool-call-feedback", args=[call.pk])


def run_url(run):
    return reverse("conversations:run-feedback", args=[run.pk])


def answer(run):
    return Message.objects.filter(run=run, role="assistant").order_by("position").last()


def test_two_puts_give_one_row_with_the_second_value(api, history, demo_conversation):
    url = message_url(demo_conversation, answer(history).position)
    first = api.put(url, {"value": 1, "comment": "Right", "tags": ["helpful"]}, format="json")
    second = api.put(url, {"value": -1, "tags": ["wrong", "wrong", " late "]}, format="json")
    assert (first.status_code, second.status_code) == (201, 200)
    row = Feedback.objects.get()
    assert (row.value, row.comment, row.tags, row.message_id) == (
        -1,
        "",
        ["wrong", "late"],
        answer(history).pk,
    )
    body = second.json()
    assert body["id"] == row.pk
    assert body["target"] == {"kind": "message", "position": answer(history).position}
    assert api.get(url).json()["value"] == -1


def test_delete_removes_the_feedback_and_a_second_delete_is_still_no_content(
    api, history, demo_conversation
):
    url = message_url(demo_conversation, answer(history).position)
    api.put(url, {"value": 1}, format="json")
    assert api.delete(url).status_code == 204
    assert not Feedback.objects.exists()
    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404


def test_feedback_on_a_tool_call_and_on_a_run(api, history):
    call = ToolCall.objects.filter(message__run=history).order_by("index").first()
    assert api.put(call_url(call), {"value": -1, "tags": ["wrong_tool"]}, format="json").json()[
        "target"
    ] == {"kind": "tool_call", "id": call.pk}
    assert api.put(run_url(history), {"value": 1}, format="json").json()["target"] == {
        "kind": "run",
        "id": str(history.pk),
    }
    assert Feedback.objects.filter(tool_call=call).get().value == -1
    assert Feedback.objects.filter(run=history).get().value == 1


def test_another_users_targets_are_not_found(other_api, history, demo_conversation):
    call = ToolCall.objects.filter(message__run=history).first()
    urls = [
        message_url(demo_conversation, answer(history).position),
        call_url(call),
        run_url(history),
    ]
    for url in urls:
        for method in ("get", "put", "delete"):
            response = getattr(other_api, method)(url, {"value": 1}, format="json")
            assert response.status_code == 404, (url, method)
            assert response.json()["code"] == "not_found"
    assert not Feedback.objects.exists()


def test_a_position_the_conversation_does_not_have_is_not_found(api, history, demo_conversation):
    assert (
        api.put(message_url(demo_conversation, 99), {"value": 1}, format="json").status_code == 404
    )


def test_feedback_on_a_user_message_or_a_tool_result_is_a_bad_request(
    api, history, demo_conversation
):
    results = Message.objects.filter(run=history, role="tool").first()
    for position in (0, results.position):
        response = api.put(message_url(demo_conversation, position), {"value": 1}, format="json")
        assert response.status_code == 400
        assert response.json()["code"] == "not_an_answer"
    assert not Feedback.objects.exists()


def test_feedback_on_a_system_message_is_a_bad_request(api, user):
    conversation = Conversation.objects.create(owner=user)
    append_messages(
        conversation=conversation,
        messages=[domain.ChatMessage.system("Be brief."), domain.ChatMessage.user("Hi")],
    )
    response = api.put(message_url(conversation, 0), {"value": 1}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "not_an_answer"
    assert "system message" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"value": 0}, "/value"),
        ({"value": 2}, "/value"),
        ({"value": True}, "/value"),
        ({"value": "up"}, "/value"),
        ({}, "/value"),
        ({"value": 1, "tags": "wrong"}, "/tags"),
        ({"value": 1, "tags": ["x" * 51]}, "/tags/0"),
        ({"value": 1, "tags": [str(n) for n in range(11)]}, "/tags"),
        ({"value": 1, "comment": "x" * 2001}, "/comment"),
    ],
)
def test_bad_feedback_names_its_field_and_stores_nothing(
    api, history, demo_conversation, body, pointer
):
    url = message_url(demo_conversation, answer(history).position)
    api.put(url, {"value": 1, "comment": "kept"}, format="json")
    response = api.put(url, body, format="json")
    assert response.status_code == 400
    assert pointer in [item["pointer"] for item in response.json()["errors"]]
    row = Feedback.objects.get()
    assert (row.value, row.comment) == (1, "kept")


def test_the_conversations_feedback_lists_what_a_page_needs(api, history, demo_conversation):
    call = ToolCall.objects.filter(message__run=history).order_by("index").first()
    api.put(message_url(demo_conversation, answer(history).position), {"value": 1}, format="json")
    api.put(call_url(call), {"value": -1}, format="json")
    url = reverse("conversations:conversation-feedback", args=[demo_conversation.pk])
    rows = api.get(url).json()
    assert [(row["value"], row["target"]) for row in rows] == [
        (1, {"kind": "message", "position": answer(history).position}),
        (-1, {"kind": "tool_call", "id": call.pk}),
    ]


def test_the_conversations_feedback_shows_only_the_callers(api, other_api, history, user):
    other = Conversation.objects.create(owner=user)
    scripted_turn(other)
    url = reverse("conversations:conversation-feedback", args=[other.pk])
    assert other_api.get(url).status_code == 404
    assert api.get(url).json() == []


def test_the_ai_sdk_stream_gives_the_position_and_the_call_pks_the_endpoints_take(
    api, demo_conversation, profile
):
    from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
    from conversations.services import execute_run

    from .test_ai_sdk import follow

    run, stream = follow(demo_conversation, profile, content="Weather in Leipzig?")
    stream.opening()
    provider = ScriptedProvider(
        [scripted_calls(("get_weather", {"city": "Leipzig"})), scripted_text("Mild.")]
    )
    execute_run(run=run, provider=provider)
    metadata = stream.poll()[-1]["messageMetadata"]
    assert metadata["position"] == answer(run).position
    response = api.put(
        message_url(demo_conversation, metadata["position"]), {"value": 1}, format="json"
    )
    assert response.status_code == 201
    assert len(metadata["toolCalls"]) == 1
    for pk in metadata["toolCalls"].values():
        assert api.put(call_url(ToolCall(pk=pk)), {"value": -1}, format="json").status_code == 201
    assert Feedback.objects.filter(message=answer(run)).exists()
    assert Feedback.objects.get(tool_call__message__run=run).value == -1
    # The history useChat reloads carries the same ids.
    history = api.get(chat_url(demo_conversation)).json()
    assert history[-1]["metadata"]["position"] == metadata["position"]
    assert history[-1]["metadata"]["toolCalls"] == metadata["toolCalls"]


def test_the_sse_events_give_the_position_and_the_call_pk_the_endpoints_take(
    api, history, demo_conversation
):
    client = Client()
    client.force_login(demo_conversation.owner)
    _response, events = read(client, history)
    turn = [e for e in events if e["event"] == "assistant_turn"][-1]
    started = next(e for e in events if e["event"] == "tool_call_started")
    position = turn["data"]["message"]["position"]
    assert (
        api.put(message_url(demo_conversation, position), {"value": 1}, format="json").status_code
        == 201
    )
    call = ToolCall(pk=started["data"]["call"]["pk"])
    assert api.put(call_url(call), {"value": 1}, format="json").status_code == 201
    run_id = events[0]["data"]["run"]["id"]
    assert api.put(run_url(Run(pk=run_id)), {"value": 1}, format="json").status_code == 201
    assert Feedback.objects.count() == 3


def test_redacting_a_conversation_empties_its_feedback_comments_and_tags(
    api, history, demo_conversation
):
    from conversations.services import redact_conversation

    url = message_url(demo_conversation, answer(history).position)
    api.put(url, {"value": -1, "comment": "It said my address", "tags": ["privacy"]}, format="json")
    redact_conversation(conversation=demo_conversation)
    row = Feedback.objects.get()
    assert (row.value, row.comment, row.tags) == (-1, "", [])
    demo_conversation.refresh_from_db()
    assert demo_conversation.redacted_at is not None


def test_listing_a_conversations_feedback_costs_the_same_queries_for_one_row_or_many(
    api, history, demo_conversation, django_assert_max_num_queries
):
    url = reverse("conversations:conversation-feedback", args=[demo_conversation.pk])
    api.put(message_url(demo_conversation, answer(history).position), {"value": 1}, format="json")
    # Authentication is forced: one query for the conversation, one for the rows.
    with django_assert_max_num_queries(2):
        assert len(api.get(url).json()) == 1
    for call in ToolCall.objects.filter(message__run=history):
        api.put(call_url(call), {"value": -1}, format="json")
    api.put(run_url(history), {"value": 1}, format="json")
    with django_assert_max_num_queries(2):
        assert len(api.get(url).json()) == 4
