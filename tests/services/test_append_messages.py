"""append_messages: positions, calls and answers, refusals before any write, query counts."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations.domain import ChatMessage, CompletionResponse, ToolCall, Usage
from conversations.exceptions import InvalidArgumentError
from conversations.models import Conversation, Message, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.services import MessageDetails, append_messages, create_conversation

from .messages import calls, tool_turn

pytestmark = pytest.mark.django_db


def stored(conversation):
    return list(
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .values_list("position", "role", "content")
    )


# create_conversation ---------------------------------------------------------------------


def test_create_conversation(user):
    conversation = create_conversation(owner=user, title="Trip", metadata={"source": "api"})
    conversation.refresh_from_db()
    assert (conversation.owner, conversation.title, conversation.metadata) == (
        user,
        "Trip",
        {"source": "api"},
    )
    assert conversation.profile is None
    assert create_conversation(owner=user).metadata == {}


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [({"title": "x" * 201}, "invalid_title"), ({"metadata": ["x"]}, "invalid_metadata")],
)
def test_create_conversation_refuses_bad_input(user, kwargs, code):
    with pytest.raises(InvalidArgumentError) as excinfo:
        create_conversation(owner=user, **kwargs)
    assert excinfo.value.code == code
    assert not Conversation.objects.exists()


# Appending ---------------------------------------------------------------------------------


def test_append_assigns_gapless_positions_across_batches(conversation):
    first = append_messages(
        conversation=conversation,
        messages=[ChatMessage.system("Be brief."), ChatMessage.user("Weather in Paris?")],
    )
    second = append_messages(conversation=conversation, messages=tool_turn(2))
    assert [m.position for m in first + second] == list(range(6))
    assert all(m.pk is not None for m in first + second)
    assert [role for _, role, _ in stored(conversation)] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_assistant_calls_become_rows_in_order(conversation):
    append_messages(conversation=conversation, messages=[ChatMessage.user("Hi")])
    made = [
        ToolCall(id="a", name="get_weather", arguments={"city": "Zürich"}),
        ToolCall(id="b", name="get_time"),
        ToolCall(id="c", name="get_weather", raw_arguments='{"city": '),
    ]
    (assistant,) = append_messages(
        conversation=conversation, messages=[ChatMessage.assistant_tool_calls(made, "Checking")]
    )
    rows = list(assistant.tool_calls.all())
    assert [(r.index, r.call_id, r.name, r.arguments, r.raw_arguments) for r in rows] == [
        (0, "a", "get_weather", {"city": "Zürich"}, None),
        (1, "b", "get_time", {}, None),
        (2, "c", "get_weather", {}, '{"city": '),
    ]
    assert all(r.conversation_id == conversation.pk for r in rows)
    assert all(r.status == ToolCallRow.Status.PENDING for r in rows)


def test_tool_messages_point_at_their_call_rows(conversation):
    rows = append_messages(conversation=conversation, messages=tool_turn(2))
    assistant, first, second, _ = rows
    by_call_id = {call.call_id: call.pk for call in assistant.tool_calls.all()}
    assert first.tool_call_id == by_call_id["call_0"]
    assert second.tool_call_id == by_call_id["call_1"]


def test_answers_may_come_in_any_order_and_in_later_batches(conversation):
    made = calls(3)
    append_messages(conversation=conversation, messages=[ChatMessage.assistant_tool_calls(made)])
    append_messages(conversation=conversation, messages=[ChatMessage.tool_result("call_2", "c")])
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.tool_result("call_0", "a"),
            ChatMessage.tool_result("call_1", "b"),
            ChatMessage.user("Thanks"),
        ],
    )
    assert [content for *_, content in stored(conversation)] == ["", "c", "a", "b", "Thanks"]


def test_details_run_and_provider_metadata_are_stored(conversation):
    run = Run.objects.create(conversation=conversation, max_iterations=3)
    response = CompletionResponse(
        content="Hi!",
        model="gpt-test",
        usage=Usage(10, 5, cached_prompt_tokens=4, reasoning_tokens=2),
        finish_reason="stop",
        provider_metadata={"signature": "abc"},
    )
    user_row, assistant_row = append_messages(
        conversation=conversation,
        messages=[ChatMessage.user("Hello"), response.to_message()],
        run=run,
        details=[None, MessageDetails.from_response(response, latency_ms=1234)],
    )
    assistant_row.refresh_from_db()
    user_row.refresh_from_db()
    assert assistant_row.run == run == user_row.run
    assert (assistant_row.model, assistant_row.finish_reason, assistant_row.latency_ms) == (
        "gpt-test",
        "stop",
        1234,
    )
    assert (
        assistant_row.prompt_tokens,
        assistant_row.completion_tokens,
        assistant_row.total_tokens,
        assistant_row.cached_prompt_tokens,
        assistant_row.reasoning_tokens,
    ) == (10, 5, 15, 4, 2)
    assert assistant_row.provider_metadata == {"signature": "abc"}
    assert user_row.model == "" and user_row.prompt_tokens is None
    assert user_row.provider_metadata == {}


def test_details_without_usage_leave_counts_empty(conversation):
    (row,) = append_messages(
        conversation=conversation,
        messages=[ChatMessage.assistant("Hi")],
        details=[MessageDetails(model="m")],
    )
    row.refresh_from_db()
    assert row.model == "m" and row.total_tokens is None and row.latency_ms is None


def test_append_bumps_updated_at(conversation):
    before = Conversation.objects.get(pk=conversation.pk).updated_at
    append_messages(conversation=conversation, messages=[ChatMessage.user("Hi")])
    after = Conversation.objects.get(pk=conversation.pk).updated_at
    assert after > before
    assert conversation.updated_at == after


def test_empty_batch_touches_nothing(conversation, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert append_messages(conversation=conversation, messages=[]) == []


# Refusals: the code, the item, and nothing written ----------------------------------------------


def refusal(conversation, messages, **kwargs):
    before = stored(conversation)
    with pytest.raises(InvalidArgumentError) as excinfo:
        append_messages(conversation=conversation, messages=messages, **kwargs)
    assert stored(conversation) == before
    return excinfo.value


def test_tool_message_without_call_id_is_refused_without_a_query(
    conversation, django_assert_num_queries
):
    with django_assert_num_queries(0), pytest.raises(InvalidArgumentError) as excinfo:
        append_messages(
            conversation=conversation,
            messages=[ChatMessage.user("Hi"), ChatMessage.tool("result")],
        )
    assert (excinfo.value.code, excinfo.value.field) == ("missing_tool_call_id", "1/tool_call_id")


def test_unknown_tool_call_id_is_refused(conversation):
    append_messages(conversation=conversation, messages=[ChatMessage.user("Hi")])
    error = refusal(conversation, [ChatMessage.tool_result("nope", "x")])
    assert (error.code, error.field) == ("unknown_tool_call_id", "0/tool_call_id")
    assert '"nope"' in error.detail


def test_answering_an_answered_call_is_refused(conversation):
    append_messages(conversation=conversation, messages=tool_turn(1))
    error = refusal(conversation, [ChatMessage.tool_result("call_0", "again")])
    assert error.code == "unknown_tool_call_id"


def test_answering_twice_in_one_batch_is_refused(conversation):
    made = calls(1)
    error = refusal(
        conversation,
        [
            ChatMessage.assistant_tool_calls(made),
            ChatMessage.tool_result("call_0", "a"),
            ChatMessage.tool_result("call_0", "b"),
        ],
    )
    assert (error.code, error.field) == ("unknown_tool_call_id", "2/tool_call_id")


def test_answering_a_call_of_another_conversation_is_refused(conversation, user):
    other = create_conversation(owner=user)
    append_messages(conversation=other, messages=[ChatMessage.assistant_tool_calls(calls(1))])
    error = refusal(conversation, [ChatMessage.tool_result("call_0", "x")])
    assert error.code == "unknown_tool_call_id"


def test_message_after_open_calls_is_refused_naming_them(conversation):
    append_messages(
        conversation=conversation, messages=[ChatMessage.assistant_tool_calls(calls(3))]
    )
    error = refusal(
        conversation, [ChatMessage.tool_result("call_1", "b"), ChatMessage.user("Hello?")]
    )
    assert (error.code, error.field) == ("unanswered_tool_calls", "1")
    assert "call_0, call_2" in error.detail


def test_open_calls_inside_one_batch_are_refused(conversation):
    error = refusal(
        conversation,
        [ChatMessage.assistant_tool_calls(calls(2)), ChatMessage.assistant("too early")],
    )
    assert (error.code, error.field) == ("unanswered_tool_calls", "1")


def test_reused_call_id_is_refused(conversation):
    append_messages(conversation=conversation, messages=tool_turn(2))
    again = [ToolCall(id="new", name="x"), ToolCall(id="call_1", name="x")]
    error = refusal(conversation, [ChatMessage.assistant_tool_calls(again)])
    assert (error.code, error.field) == ("duplicate_tool_call_id", "0/tool_calls/1/id")


def test_reused_call_id_within_a_batch_is_refused(conversation):
    error = refusal(conversation, [*tool_turn(1), *tool_turn(1)])
    assert (error.code, error.field) == ("duplicate_tool_call_id", "3/tool_calls/0/id")


def test_same_call_id_in_another_conversation_is_fine(conversation, user):
    append_messages(conversation=conversation, messages=tool_turn(1))
    other = create_conversation(owner=user)
    append_messages(conversation=other, messages=tool_turn(1))


@pytest.mark.parametrize(
    ("messages", "kwargs", "code", "field"),
    [
        ("not a list", {}, "invalid_messages", "messages"),
        ([{"role": "user", "content": "x"}], {}, "invalid_message", "0"),
        ([ChatMessage.user("x")], {"details": []}, "invalid_details", "details"),
        ([ChatMessage.user("x")], {"details": [{"model": "m"}]}, "invalid_details", "details/0"),
    ],
)
def test_malformed_arguments_are_refused(conversation, messages, kwargs, code, field):
    error = refusal(conversation, messages, **kwargs)
    assert (error.code, error.field) == (code, field)


def test_run_of_another_conversation_is_refused(conversation, user):
    other = create_conversation(owner=user)
    run = Run.objects.create(conversation=other, max_iterations=2)
    error = refusal(conversation, [ChatMessage.user("x")], run=run)
    assert error.code == "foreign_run"


@pytest.mark.parametrize(
    "kwargs",
    [{"latency_ms": -1}, {"latency_ms": True}, {"usage": {"prompt_tokens": 1}}, {"model": None}],
)
def test_message_details_validate(kwargs):
    with pytest.raises(InvalidArgumentError) as excinfo:
        MessageDetails(**kwargs)
    assert excinfo.value.code == "invalid_details"


def test_a_deleted_conversation_is_reported(conversation):
    Conversation.objects.filter(pk=conversation.pk).delete()
    with pytest.raises(Conversation.DoesNotExist):
        append_messages(conversation=conversation, messages=[ChatMessage.user("x")])


# Query counts -------------------------------------------------------------------------------


def count_queries(func) -> int:
    with CaptureQueriesContext(connection) as context:
        func()
    return len(context.captured_queries)


@pytest.mark.parametrize("split", [False, True])
def test_queries_do_not_grow_with_the_number_of_tool_calls(user, split):
    counts = []
    for size in (1, 20):
        conversation = create_conversation(owner=user)
        append_messages(conversation=conversation, messages=[ChatMessage.user("Go")])
        turn = tool_turn(size, prefix=f"c{size}")
        # split: the loop's shape (the assistant turn, then the results, then the answer).
        batches = [turn[:1], turn[1:-1], turn[-1:]] if split else [turn]
        counts.append(
            [
                count_queries(
                    lambda batch=batch, conversation=conversation: append_messages(
                        conversation=conversation, messages=batch
                    )
                )
                for batch in batches
            ]
        )
    assert counts[0] == counts[1]
    # lock + last position + open calls + messages + calls + answers (+ savepoint pair)
    assert max(counts[0]) <= 8


def test_append_query_budget(conversation, django_assert_max_num_queries):
    with django_assert_max_num_queries(8):
        append_messages(conversation=conversation, messages=tool_turn(20))
