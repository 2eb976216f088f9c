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
from tests.strategies import argument_objects, tool_call_ids, tool_names
from tests.strategies import json_scalars as shared_json_scalars
from tests.strategies import json_values as shared_json_values
from tests.strategies import tool_calls as shared_tool_calls
from tests.strategies import tool_results as shared_tool_results

PROPERTY = settings(max_examples=200, deadline=None)

json_scalars = shared_json_scalars()
json_values = shared_json_values(json_scalars, st.text(max_size=8), max_leaves=8)
arguments = st.just({}) | argument_objects(st.text(max_size=10), json_values)

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

ids = tool_call_ids
call_types = st.just("function") | st.text(min_size=1, max_size=8)
tool_calls = shared_tool_calls(ids, tool_names, arguments, raw_arguments, types=call_types)

contents = st.text(max_size=30)
metadata = st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=2)
plain_messages = st.builds(
    ChatMessage,
    role=st.sampled_from(list(Role)) | st.sampled_from([r.value for r in Role]),
    content=contents,
    provider_metadata=metadata,
)
# The OpenAI wire shape (``to_dict``) has no error flag: these results carry none.
tool_results = shared_tool_results(ids, contents, is_error=st.just(False))
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
