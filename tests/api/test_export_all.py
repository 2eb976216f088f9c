"""GET /api/export/: every conversation of the user as JSON Lines that import again."""

from __future__ import annotations

import json

import pytest

from conversations.domain import ChatMessage, ToolCall
from conversations.models import Conversation, Run
from conversations.selectors import get_history
from conversations.selectors.export import conversation_lines
from conversations.services.history.branches import fork_conversation
from conversations.services.transcript.messages import append_messages

from .conftest import scripted_turn

pytestmark = pytest.mark.django_db

EXPORT = "/api/export/"


def _lines(response):
    assert response.streaming
    body = b"".join(response.streaming_content).decode()
    assert body.endswith("\n")
    return [json.loads(line) for line in body.splitlines()]


def test_the_export_is_a_streamed_jsonl_download(api, history, demo_conversation):
    response = api.get(EXPORT)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/jsonl"
    assert response["Content-Disposition"].startswith('attachment; filename="conversations-')
    (line,) = _lines(response)
    assert line["id"] == str(demo_conversation.pk)
    assert line["profile"] == "demo"
    assert line["complete"] is True
    assert [m["role"] for m in line["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert [c["status"] for c in line["tool_calls"]] == ["succeeded", "succeeded"]
    (run,) = line["runs"]
    assert run["status"] == "completed" and run["usage"]["prompt_tokens"] == 60


def test_every_exported_conversation_imports_again(api, history, demo_conversation, user):
    branch = fork_conversation(conversation=demo_conversation, position=0)
    Conversation.objects.create(owner=user, title="Empty", metadata={"k": [1, 2]})
    failed = Conversation.objects.create(owner=user, title="With an error result")
    append_messages(
        conversation=failed,
        messages=[
            ChatMessage.user("go"),
            ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="boom", arguments={})]),
            ChatMessage.tool_result("c1", "it failed", is_error=True),
        ],
    )
    lines = _lines(api.get(EXPORT))
    assert len(lines) == 4
    originals = {c.pk: c for c in Conversation.objects.all()}
    for line in lines:
        response = api.post("/api/conversations/import/", line, format="json")
        assert response.status_code == 201, response.json()
        copy = Conversation.objects.get(pk=response.json()["id"])
        original = originals[Conversation._meta.pk.to_python(line["id"])]
        assert get_history(conversation=copy) == get_history(conversation=original)
        assert (copy.title, copy.metadata) == (original.title, original.metadata)
    assert branch.pk in originals


def test_a_turn_still_running_is_left_out_until_it_ends(api, demo_conversation):
    run = Run.objects.create(
        conversation=demo_conversation, status=Run.Status.RUNNING, max_iterations=3
    )
    append_messages(
        conversation=demo_conversation,
        run=run,
        messages=[
            ChatMessage.user("go"),
            ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="now", arguments={})]),
        ],
    )
    (line,) = _lines(api.get(EXPORT))
    assert line["complete"] is False
    assert [m["role"] for m in line["messages"]] == ["user"]
    assert api.post("/api/conversations/import/", line, format="json").status_code == 201


def test_only_the_users_own_conversations_are_exported(api, other_api, other_run, history):
    assert [line["title"] for line in _lines(api.get(EXPORT))] == ["Weather talk"]
    assert [line["title"] for line in _lines(other_api.get(EXPORT))] == ["Secret"]


def test_the_export_needs_a_login(anonymous):
    assert anonymous.get(EXPORT).status_code in (401, 403)


def test_the_export_runs_seven_queries_whatever_the_number_of_conversations(
    user, profile, django_assert_num_queries
):
    for index in range(5):
        scripted_turn(Conversation.objects.create(owner=user, title=f"c{index}", profile=profile))
    # Conversations, messages, calls, attachment links, provider tool calls, citations and
    # runs: each one stream, read two rows at a time.
    with django_assert_num_queries(7):
        lines = list(conversation_lines(user=user, chunk_size=2))
    assert [json.loads(line)["title"] for line in lines] == [f"c{i}" for i in range(5)]


def test_streamed_rows_go_to_their_own_conversation_when_creation_times_tie(user, profile):
    conversations = [
        Conversation.objects.create(owner=user, title=f"c{index}", profile=profile)
        for index in range(4)
    ]
    for conversation in conversations:
        scripted_turn(conversation, content=f"About {conversation.title}?")
    Conversation.objects.filter(owner=user).update(created_at=conversations[0].created_at)
    lines = [json.loads(line) for line in conversation_lines(user=user, chunk_size=3)]
    assert sorted(line["title"] for line in lines) == ["c0", "c1", "c2", "c3"]
    for line in lines:
        assert line["messages"][0]["content"] == f"About {line['title']}?"
        assert len(line["messages"]) == 5 and len(line["tool_calls"]) == 2
        assert len(line["runs"]) == 1
