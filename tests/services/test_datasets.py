"""Datasets from rated conversations: fine-tuning lines, preference pairs, what never appears."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from conversations.domain import CompletionResponse, ProviderToolActivity, SourceCitation
from conversations.models import Conversation, Evaluation, Message
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import erase_user, redact_conversation, run_tool_loop
from conversations.services.feedback import DatasetQuery, dataset_lines, set_feedback
from conversations.services.history import branch_for_regenerate
from conversations.services.transcript.provider_activity import record_provider_activity

from ..finetuning_format import FormatError, check_chat_line, check_preference_line

pytestmark = pytest.mark.django_db


def turn(conversation, question="Weather in Paris?", answer="Sunny in Paris.", calls=True):
    replies = []
    if calls:
        replies.append(scripted_calls(("get_weather", {"city": "Paris"})))
    replies.append(scripted_text(answer))
    return run_tool_loop(
        conversation=conversation, content=question, provider=ScriptedProvider(replies)
    )


def final(conversation):
    return Message.objects.filter(conversation=conversation, role="assistant").last()


def rate(conversation, value):
    set_feedback(user=conversation.owner, target=final(conversation), value=value)


def lines(format, **query):
    return list(dataset_lines(query=DatasetQuery(**query), format=format))


def every_format(**query):
    return {name: lines(name, **query) for name in ("openai-chat", "openai-dpo", "jsonl")}


@pytest.fixture
def conversations(user, profile):
    made = {}
    for name in ("up", "down", "both", "unrated"):
        made[name] = Conversation.objects.create(owner=user, profile=profile, title=name)
        turn(made[name], answer=f"Answer {name}.")
    rate(made["up"], 1)
    rate(made["down"], -1)
    set_feedback(user=user, target=made["both"].runs.get(), value=-1)
    rate(made["both"], 1)
    return made


def test_every_openai_chat_line_passes_the_format_validator(conversations, profile):
    found = lines("openai-chat")
    assert len(found) == 4
    for line in found:
        check_chat_line(line)
    first = found[0]
    assert first["messages"][0] == {"role": "system", "content": profile.system_prompt}
    calling = first["messages"][2]
    assert json.loads(calling["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert calling["content"] is None
    assert [tool["function"]["name"] for tool in first["tools"]] == ["get_weather"]
    assert first["tools"][0]["function"]["parameters"]["type"] == "object"


def test_an_answer_rated_down_is_context_with_weight_zero(conversations):
    found = lines("openai-chat", rated="down")
    weights = [line["messages"][-1].get("weight") for line in found]
    assert weights == [0, None]  # "down" rated its answer; "both" rated the run down


@pytest.mark.parametrize(
    ("rated", "expected"),
    [
        ("up", ["up"]),
        ("down", ["down", "both"]),
        ("any", ["up", "down", "both"]),
        (None, ["up", "down", "both", "unrated"]),
    ],
)
def test_the_rated_filters_hold(conversations, rated, expected):
    found = lines("jsonl", rated=rated)
    assert [line["conversation"] for line in found] == [
        str(conversations[name].pk) for name in expected
    ]


def test_the_own_format_carries_the_feedback(conversations):
    (line,) = lines("jsonl", rated="up")
    assert line["feedback"] == [
        {
            "value": 1,
            "comment": "",
            "tags": [],
            "position": final(conversations["up"]).position,
            "tool_call_id": None,
            "run": None,
        }
    ]


def regenerated(conversation, answer):
    branch = branch_for_regenerate(conversation=conversation)
    run_tool_loop(
        conversation=branch,
        content=None,
        provider=ScriptedProvider(
            [scripted_calls(("get_weather", {"city": "Paris"})), scripted_text(answer)]
        ),
    )
    return branch


def test_two_regenerated_answers_rated_up_and_down_give_one_pair(user, profile):
    original = Conversation.objects.create(owner=user, profile=profile)
    turn(original, answer="Sunny, 21C in Paris.")
    branch = regenerated(original, "I cannot know that.")
    rate(original, 1)
    rate(branch, -1)
    (pair,) = lines("openai-dpo")
    check_preference_line(pair)
    assert pair["preferred_output"] == [{"role": "assistant", "content": "Sunny, 21C in Paris."}]
    assert pair["non_preferred_output"] == [{"role": "assistant", "content": "I cannot know that."}]
    assert pair["input"]["messages"][-1] == {"role": "user", "content": "Weather in Paris?"}
    assert pair["input"]["messages"][0]["role"] == "system"


def test_the_preferred_output_follows_the_ratings_not_the_order(user, profile):
    original = Conversation.objects.create(owner=user, profile=profile)
    turn(original, answer="First answer.")
    branch = regenerated(original, "Second answer.")
    rate(original, -1)
    rate(branch, 1)
    (pair,) = lines("openai-dpo")
    assert pair["preferred_output"][0]["content"] == "Second answer."


@pytest.mark.parametrize("values", [(1, 1), (-1, -1), (1, None)])
def test_without_opposite_ratings_there_is_no_pair(user, profile, values):
    original = Conversation.objects.create(owner=user, profile=profile)
    turn(original, answer="First answer.")
    branch = regenerated(original, "Second answer.")
    for conversation, value in zip((original, branch), values, strict=True):
        if value is not None:
            rate(conversation, value)
    assert lines("openai-dpo") == []


def test_answers_to_different_prefixes_are_not_a_pair(user, profile):
    one = Conversation.objects.create(owner=user, profile=profile)
    turn(one, answer="Sunny.")
    two = Conversation.objects.create(owner=user, profile=profile)
    turn(two, question="Weather in Rome?", answer="Rainy.")
    rate(one, 1)
    rate(two, -1)
    assert lines("openai-dpo") == []


def test_redacted_and_erased_content_never_appears_in_any_format(user, other_user, profile):
    secret = Conversation.objects.create(owner=user, profile=profile)
    turn(secret, question="My card is 4111-1111", answer="Noted: 4111-1111.")
    rate(secret, 1)
    clean = Conversation.objects.create(owner=user, profile=profile)
    turn(clean, answer="Sunny.")
    rate(clean, 1)
    rate(regenerated(clean, "No idea."), -1)
    erased = Conversation.objects.create(owner=other_user, profile=profile)
    turn(erased, question="I live at 5 Elm Street", answer="5 Elm Street it is.")
    rate(erased, 1)
    rate(regenerated(erased, "Elm Street, noted."), -1)
    before = json.dumps(every_format())
    assert "4111-1111" in before and "Elm Street" in before  # the test can fail
    redact_conversation(conversation=secret)
    erase_user(user=other_user, mode="redact")
    after = every_format()
    text = json.dumps(after)
    assert "4111-1111" not in text and "Elm Street" not in text
    assert "[redacted]" not in text.lower()
    assert len(after["openai-dpo"]) == 1  # the clean pair only
    assert {line["conversation"] for line in after["jsonl"]} == {
        str(c.pk) for c in Conversation.objects.filter(owner=user).exclude(pk=secret.pk)
    }
    erase_user(user=user, mode="delete")
    assert every_format() == {"openai-chat": [], "openai-dpo": [], "jsonl": []}


def test_evaluation_conversations_appear_only_when_asked(user, profile):
    evaluation = Evaluation.objects.create(dataset_sha256="0" * 64, profiles=["demo"])
    replay = Conversation.objects.create(
        owner=user, profile=profile, kind="evaluation", evaluation=evaluation
    )
    turn(replay)
    assert lines("jsonl") == []
    assert [line["conversation"] for line in lines("jsonl", evaluations=True)] == [str(replay.pk)]


def test_the_owner_profile_and_date_filters_hold(user, other_user, profile, conversations):
    mine = lines("jsonl", owner=user)
    assert len(mine) == 4
    assert lines("jsonl", owner=other_user) == []
    assert lines("jsonl", profile="nope") == []
    created = conversations["up"].created_at
    assert len(lines("jsonl", date_from=created)) >= 1
    assert lines("jsonl", date_to=conversations["up"].created_at) == []


def test_the_command_writes_the_file_with_a_progress_bar(conversations, tmp_path):
    target = tmp_path / "chat.jsonl"
    err = io.StringIO()
    call_command("export_dataset", str(target), "--rated", "any", stderr=err)
    written = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(written) == 3
    for line in written:
        check_chat_line(line)
    assert "[" + "#" * 30 + "] 3/3 conversations" in err.getvalue()
    assert "3 line(s) of openai-chat from 3 conversation(s)." in err.getvalue()


@pytest.mark.parametrize(
    "line",
    [
        {"messages": []},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "robot", "content": "hi"}, {"role": "assistant", "content": "x"}]},
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c", "content": "1"},
                {"role": "assistant", "content": "done"},
            ],
            "tools": [{"type": "function", "function": {"name": "f"}}],
        },
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "assistant", "content": "done"},
            ],
            "tools": [{"type": "function", "function": {"name": "f"}}],
        },
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "x", "weight": 0},
            ]
        },
    ],
)
def test_the_validator_refuses_lines_the_format_does_not_allow(line):
    with pytest.raises(FormatError):
        check_chat_line(line)


def test_the_own_format_carries_what_the_provider_did_and_the_fine_tuning_format_does_not(
    conversations,
):
    answer = final(conversations["up"])
    response = CompletionResponse(
        content=answer.content,
        model="m",
        provider="openai",
        provider_tool_calls=(ProviderToolActivity("web_search", "ws_1", "completed", "paris"),),
        citations=(SourceCitation(start=0, end=5, url="https://example.com", title="Ex"),),
    )
    record_provider_activity(message=answer, response=response)
    (line,) = lines("jsonl", rated="up")
    *earlier, last = line["messages"]
    assert last["provider_tool_calls"] == [
        {
            "kind": "web_search",
            "provider": "openai",
            "id": "ws_1",
            "status": "completed",
            "query": "paris",
            "code": "",
            "result_summary": "",
        }
    ]
    assert last["citations"] == [
        {"start": 0, "end": 5, "url": "https://example.com", "title": "Ex", "source_id": ""}
    ]
    assert not any("citations" in m or "provider_tool_calls" in m for m in earlier)
    (chat,) = lines("openai-chat", rated="up")
    assert not any("citations" in m or "provider_tool_calls" in m for m in chat["messages"])
    check_chat_line(chat)
