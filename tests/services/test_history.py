"""get_history: rows back to value objects, equal to what was appended, in constant queries."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.domain import TOOL_NAME_PATTERN, ChatMessage, ToolCall
from conversations.models import Message
from conversations.selectors import (
    get_history,
    history_for_provider,
    message_to_domain,
    open_tool_calls,
)
from conversations.services import append_messages, create_conversation
from tests.strategies import (
    RAW_NOT_OBJECTS,
    argument_objects,
    json_scalars,
    storable_text,
    tool_calls,
)
from tests.strategies import histories as shared_histories
from tests.strategies import json_values as shared_json_values

from .messages import calls, tool_turn

pytestmark = pytest.mark.django_db

text = storable_text
json_values = shared_json_values(json_scalars(text, storable_numbers=True), keys=text, max_leaves=8)
metadata = st.none() | st.dictionaries(text, json_values, min_size=1, max_size=2)
# Argument text that is not a JSON object: kept raw, arguments empty.
raw = st.sampled_from(RAW_NOT_OBJECTS) | text.map(lambda value: value or "[]")


def _call(call_id: str) -> st.SearchStrategy[ToolCall]:
    names = st.from_regex(TOOL_NAME_PATTERN, fullmatch=True)
    return tool_calls(st.just(call_id), names, argument_objects(text, json_values), raw)


def histories() -> st.SearchStrategy[list[ChatMessage]]:
    """Valid conversations with metadata on assistant messages and flagged results."""
    return shared_histories(
        texts=text,
        ids=text.filter(bool),
        calls=_call,
        turn_metadata=lambda ids: metadata,
        answer_metadata=metadata,
    )


@given(history=histories(), data=st.data())
@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_round_trip(history, data):
    # Split into batches anywhere: every prefix of a valid history is valid to append.
    cuts = sorted(
        data.draw(st.sets(st.integers(min_value=1, max_value=len(history) - 1), max_size=3))
        if len(history) > 1
        else set()
    )
    bounds = [0, *cuts, len(history)]
    with transaction.atomic():
        owner = get_user_model().objects.create(username="hypothesis")
        conversation = create_conversation(owner=owner)
        for start, end in itertools.pairwise(bounds):
            append_messages(conversation=conversation, messages=history[start:end])
        restored = get_history(conversation=conversation)
        assert restored == history
        # provider_metadata is not part of equality: compare it on its own.
        assert [m.provider_metadata for m in restored] == [
            m.provider_metadata or None for m in history
        ]
        assert open_tool_calls(conversation=conversation) == []
        transaction.set_rollback(True)


def test_round_trip_of_a_known_conversation(user):
    conversation = create_conversation(owner=user)
    history = [
        ChatMessage.system("Be brief."),
        ChatMessage.user("Weather in Zürich and Paris?"),
        ChatMessage.assistant_tool_calls(
            [
                ToolCall(id="a", name="get_weather", arguments={"city": "Zürich"}),
                ToolCall(id="b", name="get_weather", raw_arguments='{"city": "Par'),
                ToolCall(id="c", name="now"),
            ],
            provider_metadata={"reasoning": {"signature": "sig"}},
        ),
        ChatMessage.tool_result("b", "Error: arguments are not a JSON object."),
        ChatMessage.tool_result("a", "18C"),
        ChatMessage.tool_result("c", "12:00"),
        ChatMessage.assistant("Zürich: 18C."),
    ]
    append_messages(conversation=conversation, messages=history)
    restored = get_history(conversation=conversation)
    assert restored == history
    assert restored[2].provider_metadata == {"reasoning": {"signature": "sig"}}
    assert restored[2].to_dict()["tool_calls"][2]["function"]["arguments"] == "{}"
    assert restored[2].tool_calls[1].arguments_json == '{"city": "Par'


def test_empty_conversation_has_an_empty_history(conversation):
    assert get_history(conversation=conversation) == []


def test_message_to_domain_maps_single_rows(conversation):
    append_messages(conversation=conversation, messages=[ChatMessage.user("Hi"), *tool_turn(2)])
    rows = list(conversation.messages.select_related("tool_call").order_by("position"))
    assert [message_to_domain(row) for row in rows] == get_history(conversation=conversation)


def test_open_tool_calls(conversation):
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("Hi"),
            ChatMessage.assistant_tool_calls(calls(3)),
            ChatMessage.tool_result("call_1", "b"),
        ],
    )
    assert [call.call_id for call in open_tool_calls(conversation=conversation)] == [
        "call_0",
        "call_2",
    ]


def history_of(user, rounds: int):
    """A conversation of ``5 * rounds`` messages, each round with two parallel calls."""
    conversation = create_conversation(owner=user)
    batch = []
    for n in range(rounds):
        batch += [ChatMessage.user(f"question {n}"), *tool_turn(2, prefix=f"r{n}")[:-1]]
        batch.append(ChatMessage.assistant(f"answer {n}"))
    append_messages(conversation=conversation, messages=batch)
    assert Message.objects.filter(conversation=conversation).count() == 5 * rounds
    return conversation


def test_history_queries_do_not_grow_with_its_length(user, django_assert_max_num_queries):
    small, large = history_of(user, 2), history_of(user, 100)
    counts = []
    for conversation in (small, large):
        with CaptureQueriesContext(connection) as context:
            history = get_history(conversation=conversation)
        counts.append(len(context.captured_queries))
        assert history[1].tool_calls is not None
    assert counts[0] == counts[1] <= 3
    with django_assert_max_num_queries(3):
        assert len(get_history(conversation=large)) == 500


def test_what_a_provider_is_sent_reads_in_the_same_queries_at_any_length(user, profile):
    """The loop's read: the profile's system prompt, then the history (5 and 30 messages)."""
    counts = []
    for rounds in (1, 6):
        conversation = history_of(user, rounds)
        with CaptureQueriesContext(connection) as context:
            sent = history_for_provider(conversation=conversation, profile=profile)
        counts.append(len(context.captured_queries))
        assert len(sent) == 1 + 5 * rounds
        assert sent[0] == ChatMessage.system(profile.system_prompt)
        assert sent[2].tool_calls is not None and len(sent[2].tool_calls) == 2
    assert counts[0] == counts[1] <= 2
