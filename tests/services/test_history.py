"""get_history: rows back to value objects, equal to what was appended, in constant queries."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.domain import TOOL_NAME_PATTERN, ChatMessage, Role, ToolCall
from conversations.models import Message
from conversations.selectors import get_history, message_to_domain, open_tool_calls
from conversations.services import append_messages, create_conversation

from .messages import calls, tool_turn

pytestmark = pytest.mark.django_db

# PostgreSQL text and jsonb cannot hold NUL; lone surrogates are not UTF-8.
text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    # jsonb keeps numbers as numeric: 1.2e+16 reads back as the int 12000000000000000
    # and -0.0 as 0.0. Below 1e15 Python writes floats with a decimal point and
    # they round-trip exactly (docs/data-model.md, "JSON values").
    | st.floats(min_value=-1e15, max_value=1e15).map(lambda x: x + 0.0)
    | text
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(text, json_values, max_size=4)
tool_names = st.from_regex(TOOL_NAME_PATTERN, fullmatch=True)
metadata = st.none() | st.dictionaries(text, json_values, min_size=1, max_size=2)


@st.composite
def tool_calls(draw, serial):
    call_id = f"{draw(text.filter(bool))}#{next(serial)}"  # unique in the conversation
    if draw(st.booleans()):
        return ToolCall(id=call_id, name=draw(tool_names), arguments=draw(json_objects))
    # Argument text that is not a JSON object: kept raw, arguments empty.
    raw = draw(st.sampled_from(["[]", "null", '{"city": ', "not json", "{'a': 1}"]) | text)
    return ToolCall(id=call_id, name=draw(tool_names), raw_arguments=raw or "[]")


@st.composite
def histories(draw):
    """A valid conversation: every call answered before the next non-tool message."""
    serial = iter(range(10**6))
    history: list[ChatMessage] = []
    if draw(st.booleans()):
        history.append(ChatMessage.system(draw(text)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        history.append(ChatMessage.user(draw(text)))
        for _ in range(draw(st.integers(min_value=0, max_value=2))):
            made = draw(st.lists(tool_calls(serial), min_size=1, max_size=4))
            history.append(
                ChatMessage.assistant_tool_calls(made, draw(text), provider_metadata=draw(metadata))
            )
            for call in draw(st.permutations(made)):
                history.append(ChatMessage.tool_result(call.id, draw(text)))
        history.append(ChatMessage(Role.ASSISTANT, draw(text), provider_metadata=draw(metadata)))
    return history


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
