"""Property: every valid message survives its own wire form, as a dict and as JSON."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.domain import (
    ChatMessage,
    InvalidArgumentError,
    Role,
    ToolCall,
    normalise_messages,
)
from conversations.domain.messages import decode_arguments

PROPERTY = settings(max_examples=200, deadline=None)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
arguments = st.just({}) | st.dictionaries(st.text(max_size=10), json_values, max_size=4)

# What a provider may send that is not a JSON object: noise, truncated
# objects, JSON that is something else, and the non-JSON constants.
raw_arguments = st.one_of(
    st.text(min_size=1, max_size=20),
    st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=3).map(
        lambda d: json.dumps(d, ensure_ascii=False)[:-1]
    ),
    (json_scalars | st.lists(json_values, max_size=3)).map(json.dumps),
    st.sampled_from(["NaN", "-Infinity", '{"x": NaN}', "[]", "null", '""', " "]),
).filter(lambda text: decode_arguments(text) is None)

ids = st.text(min_size=1, max_size=12)
call_types = st.just("function") | st.text(min_size=1, max_size=8)
tool_calls = st.builds(
    ToolCall, id=ids, name=st.text(min_size=1, max_size=12), arguments=arguments, type=call_types
) | st.builds(
    ToolCall,
    id=ids,
    name=st.text(min_size=1, max_size=12),
    type=call_types,
    raw_arguments=raw_arguments,
)

contents = st.text(max_size=30)
metadata = st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=2)
plain_messages = st.builds(
    ChatMessage,
    role=st.sampled_from(list(Role)) | st.sampled_from([r.value for r in Role]),
    content=contents,
    provider_metadata=metadata,
)
tool_results = st.builds(ChatMessage.tool_result, ids, contents)
assistant_turns = st.builds(
    ChatMessage.assistant_tool_calls,
    st.lists(tool_calls, min_size=1, max_size=4, unique_by=lambda call: call.id),
    st.none() | contents,
    provider_metadata=metadata,
)
messages = plain_messages | tool_results | assistant_turns


@PROPERTY
@given(messages)
def test_message_round_trips_through_to_dict(message):
    data = message.to_dict()
    rebuilt = ChatMessage.from_dict(data)
    assert rebuilt == message
    assert rebuilt.to_dict() == data


@PROPERTY
@given(messages)
def test_message_round_trips_through_json(message):
    text = message.to_json()
    assert ChatMessage.from_dict(json.loads(text)) == message
    # Compact, non-ASCII kept: re-encoding the same way changes nothing.
    assert json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False) == text


@PROPERTY
@given(messages)
def test_wire_shape(message):
    data = message.to_dict()
    expected_keys = ["role", "content"]
    if message.tool_calls is not None:
        expected_keys.append("tool_calls")
    if message.tool_call_id is not None:
        expected_keys.append("tool_call_id")
    assert list(data) == expected_keys
    for call, wire in zip(message.tool_calls or (), data.get("tool_calls", []), strict=True):
        text = wire["function"]["arguments"]
        assert isinstance(text, str)
        if call.raw_arguments is None:
            assert json.loads(text) == call.arguments
            assert text != "[]"
        else:
            assert text == call.raw_arguments


@PROPERTY
@given(tool_calls)
def test_tool_call_round_trips_through_both_shapes(call):
    assert ToolCall.from_dict(call.to_wire()) == call
    assert ToolCall.from_dict(call.to_dict()) == call
    assert ToolCall.from_dict(json.loads(json.dumps(call.to_dict()))) == call
    assert ToolCall.try_from_dict(call.to_wire()) == call


@PROPERTY
@given(st.lists(messages, max_size=4), st.randoms(use_true_random=False))
def test_normalise_mixed_items(history, random):
    items = [m if random.random() < 0.5 else m.to_dict() for m in history]
    result = normalise_messages(items)
    assert result == history
    for item, out in zip(items, result, strict=True):
        if isinstance(item, ChatMessage):
            assert out is item


# Anything the constructor accepts must round-trip, not just what the
# strategies above build on purpose: raw text that happens to be a JSON
# object, and Python containers that only look like JSON (tuples).
python_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
any_arguments = st.dictionaries(st.text(max_size=10), python_values, max_size=4)
any_raw = st.none() | st.text(max_size=20) | any_arguments.map(json.dumps) | raw_arguments


@PROPERTY
@given(any_arguments, any_raw)
def test_every_constructible_call_round_trips(arguments, raw):
    try:
        call = ToolCall(id="c", name="x", arguments=arguments, raw_arguments=raw)
    except InvalidArgumentError as exc:
        assert exc.code == "invalid_arguments"
        assert raw is not None
        return
    assert ToolCall.from_dict(call.to_wire()) == call
    assert ToolCall.from_dict(call.to_dict()) == call
