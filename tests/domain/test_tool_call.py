"""ToolCall: validation order, the wire and decoded shapes, and lenient parsing."""

import dataclasses
import json
import math
from contextlib import contextmanager

import pytest

from conversations.domain import InvalidArgumentError, ToolCall
from conversations.domain.messages import decode_arguments, encode_arguments


@contextmanager
def expect_error(code, field=None):
    """Expect an InvalidArgumentError with exactly this ``code`` and ``field``."""
    with pytest.raises(InvalidArgumentError) as info:
        yield info
    assert (info.value.code, info.value.field) == (code, field), str(info.value)


# Construction ---------------------------------------------------------------


def test_defaults():
    call = ToolCall(id="call_1", name="get_weather")
    assert call.arguments == {}
    assert call.type == "function"
    assert call.raw_arguments is None


def test_error_is_a_value_error():
    with pytest.raises(ValueError):
        ToolCall(id="", name="x")


@pytest.mark.parametrize("bad_id", ["", None, 7])
def test_empty_id(bad_id):
    with expect_error("empty_tool_call_id", "id") as info:
        ToolCall(id=bad_id, name="x")
    assert repr(bad_id) in str(info.value)


@pytest.mark.parametrize("bad_name", ["", None, 7])
def test_empty_name(bad_name):
    with expect_error("empty_tool_name", "function/name") as info:
        ToolCall(id="c", name=bad_name)
    assert repr(bad_name) in str(info.value)


@pytest.mark.parametrize("bad_type", ["", None])
def test_empty_type(bad_type):
    with expect_error("empty_tool_type", "type") as info:
        ToolCall(id="c", name="x", type=bad_type)
    assert repr(bad_type) in str(info.value)


@pytest.mark.parametrize(
    ("arguments", "type_name"), [([], "list"), ("{}", "str"), (3, "int"), (None, "null")]
)
def test_arguments_not_a_mapping(arguments, type_name):
    with expect_error("invalid_arguments", "function/arguments") as info:
        ToolCall(id="c", name="x", arguments=arguments)
    assert type_name in str(info.value)


def test_check_order_id_first():
    with expect_error("empty_tool_call_id", "id"):
        ToolCall(id="", name="", arguments=[], type="")


def test_check_order_name_before_type_and_arguments():
    with expect_error("empty_tool_name", "function/name"):
        ToolCall(id="c", name="", arguments=[], type="")


def test_check_order_type_before_arguments():
    with expect_error("empty_tool_type", "type"):
        ToolCall(id="c", name="x", arguments=[], type="")


def test_argument_names_must_be_strings():
    with expect_error("invalid_arguments", "function/arguments"):
        ToolCall(id="c", name="x", arguments={1: "one"})


@pytest.mark.parametrize(
    "arguments",
    [
        {"when": object()},
        {"x": math.nan},
        {"x": math.inf},
        {"x": {1, 2}},
    ],
)
def test_arguments_must_be_json(arguments):
    with expect_error("invalid_arguments", "function/arguments") as info:
        ToolCall(id="c", name="x", arguments=arguments)
    assert "not JSON-serialisable" in str(info.value)


@pytest.mark.parametrize("raw", ["", 5, b"{"])
def test_raw_arguments_must_be_a_non_empty_string(raw):
    with expect_error("invalid_arguments", "function/arguments"):
        ToolCall(id="c", name="x", raw_arguments=raw)


def test_raw_arguments_need_empty_arguments():
    with expect_error("invalid_arguments", "function/arguments"):
        ToolCall(id="c", name="x", arguments={"a": 1}, raw_arguments='{"a":')


@pytest.mark.parametrize("raw", ["{}", '{"a":1}', ' {"a": [1]} '])
def test_raw_arguments_that_are_a_json_object_are_rejected(raw):
    # They belong in ``arguments``; kept raw they would not survive the wire.
    with expect_error("invalid_arguments", "function/arguments") as info:
        ToolCall(id="c", name="x", raw_arguments=raw)
    assert repr(raw) in str(info.value)


def test_is_frozen():
    call = ToolCall(id="c", name="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "y"


def test_arguments_are_a_deep_private_copy():
    given = {"a": {"b": [1]}}
    call = ToolCall(id="c", name="x", arguments=given)
    given["a"]["b"].append(2)
    given["z"] = 1
    assert call.arguments == {"a": {"b": [1]}}


def test_arguments_are_normalised_to_json_values():
    call = ToolCall(id="c", name="x", arguments={"a": (1, 2)})
    assert call.arguments == {"a": [1, 2]}
    assert ToolCall.from_dict(call.to_wire()) == call


def test_equality_is_by_value():
    assert ToolCall("c", "x", {"a": 1}) == ToolCall("c", "x", {"a": 1})
    assert ToolCall("c", "x", {"a": 1}) != ToolCall("c", "x", {"a": 2})


# Wire shape -------------------------------------------------------------------


def test_to_wire_shape_and_key_order():
    wire = ToolCall(id="call_1", name="get_weather", arguments={"location": "Leipzig"}).to_wire()
    assert wire == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"location":"Leipzig"}'},
    }
    assert list(wire) == ["id", "type", "function"]
    assert list(wire["function"]) == ["name", "arguments"]


def test_to_wire_empty_arguments_is_an_object_never_a_list():
    wire = ToolCall(id="c", name="x").to_wire()
    assert wire["function"]["arguments"] == "{}"


def test_to_wire_is_compact_and_keeps_non_ascii_and_slashes():
    call = ToolCall(
        id="c",
        name="x",
        arguments={"city": "Köln", "sky": "☀", "url": "a/b", "n": [1, {"k": None}]},
    )
    text = call.to_wire()["function"]["arguments"]
    assert text == '{"city":"Köln","sky":"☀","url":"a/b","n":[1,{"k":null}]}'


def test_to_wire_keeps_the_type():
    assert ToolCall(id="c", name="x", type="custom").to_wire()["type"] == "custom"


def test_to_wire_emits_raw_arguments_unchanged():
    raw = '{"location": "Leip'
    call = ToolCall(id="c", name="x", raw_arguments=raw)
    assert call.to_wire()["function"]["arguments"] == raw
    assert call.arguments_json == raw


def test_arguments_json():
    assert ToolCall(id="c", name="x", arguments={"a": 1}).arguments_json == '{"a":1}'


# Decoded shape ----------------------------------------------------------------


def test_to_dict_keeps_arguments_decoded():
    call = ToolCall(id="c", name="x", arguments={"a": [1, 2]})
    assert call.to_dict() == {
        "id": "c",
        "type": "function",
        "function": {"name": "x", "arguments": {"a": [1, 2]}},
    }


def test_to_dict_carries_raw_arguments():
    call = ToolCall(id="c", name="x", raw_arguments="not json")
    assert call.to_dict() == {
        "id": "c",
        "type": "function",
        "function": {"name": "x", "arguments": {}},
        "raw_arguments": "not json",
    }


def test_to_dict_returns_a_copy():
    call = ToolCall(id="c", name="x", arguments={"a": 1})
    call.to_dict()["function"]["arguments"]["a"] = 2
    assert call.arguments == {"a": 1}


# from_dict ---------------------------------------------------------------------


def test_from_dict_wire_form():
    call = ToolCall.from_dict(
        {"id": "c", "type": "function", "function": {"name": "x", "arguments": '{"a":1}'}}
    )
    assert call == ToolCall(id="c", name="x", arguments={"a": 1})
    assert call.raw_arguments is None


def test_from_dict_decoded_form():
    call = ToolCall.from_dict({"id": "c", "function": {"name": "x", "arguments": {"a": [1]}}})
    assert call == ToolCall(id="c", name="x", arguments={"a": [1]})


@pytest.mark.parametrize("present", [False, True])
@pytest.mark.parametrize("value", [None, ""])
def test_from_dict_missing_null_or_empty_arguments_mean_empty(present, value):
    function = {"name": "x"}
    if present:
        function["arguments"] = value
    call = ToolCall.from_dict({"id": "c", "function": function})
    assert call.arguments == {}
    assert call.raw_arguments is None
    assert call.to_wire()["function"]["arguments"] == "{}"


@pytest.mark.parametrize(
    "raw",
    [
        '{"location": "Leip',  # truncated
        "not json",
        '"just a string"',
        "[1, 2]",
        "[]",
        "42",
        "null",
        "true",
        "NaN",
        "Infinity",
        '{"x": NaN}',
        '{"x": -Infinity}',
    ],
)
def test_from_dict_string_that_is_not_a_json_object_is_kept_raw(raw):
    call = ToolCall.from_dict({"id": "c", "function": {"name": "x", "arguments": raw}})
    assert call.arguments == {}
    assert call.raw_arguments == raw
    assert call.to_wire()["function"]["arguments"] == raw


@pytest.mark.parametrize(
    ("arguments", "type_name"),
    [([1, 2], "list"), ([], "list"), (42, "int"), (1.5, "float"), (True, "bool")],
)
def test_from_dict_other_argument_types_are_invalid(arguments, type_name):
    with expect_error("invalid_arguments", "function/arguments") as info:
        ToolCall.from_dict({"id": "c", "function": {"name": "x", "arguments": arguments}})
    assert type_name in str(info.value)


@pytest.mark.parametrize("data", [{"id": "c"}, {"id": "c", "function": "x"}])
def test_from_dict_without_function_object_fails_on_the_name(data):
    with expect_error("empty_tool_name", "function/name"):
        ToolCall.from_dict(data)


def test_from_dict_empty_fails_on_the_id_first():
    with expect_error("empty_tool_call_id", "id"):
        ToolCall.from_dict({})


@pytest.mark.parametrize("bad_id", [None, 5, ""])
def test_from_dict_non_string_id(bad_id):
    with expect_error("empty_tool_call_id", "id"):
        ToolCall.from_dict({"id": bad_id, "function": {"name": "x"}})


def test_from_dict_non_string_name():
    with expect_error("empty_tool_name", "function/name"):
        ToolCall.from_dict({"id": "c", "function": {"name": 5}})


@pytest.mark.parametrize("data", [{}, {"type": None}, {"type": ""}])
def test_from_dict_missing_or_empty_type_means_function(data):
    call = ToolCall.from_dict({"id": "c", "function": {"name": "x"}, **data})
    assert call.type == "function"


def test_from_dict_keeps_another_type():
    call = ToolCall.from_dict({"id": "c", "type": "custom", "function": {"name": "x"}})
    assert call.type == "custom"


def test_from_dict_non_string_type_is_rejected():
    with expect_error("empty_tool_type", "type"):
        ToolCall.from_dict({"id": "c", "type": 5, "function": {"name": "x"}})


@pytest.mark.parametrize("data", [None, "call", ["c"], 5])
def test_from_dict_not_an_object(data):
    with expect_error("invalid_tool_call") as info:
        ToolCall.from_dict(data)
    assert type(data).__name__ in str(info.value) or "null" in str(info.value)


def test_from_dict_decoded_form_with_raw_arguments():
    call = ToolCall(id="c", name="x", raw_arguments="oops")
    assert ToolCall.from_dict(call.to_dict()) == call


def test_from_dict_ignores_stored_raw_when_arguments_decode():
    call = ToolCall.from_dict(
        {"id": "c", "function": {"name": "x", "arguments": {"a": 1}}, "raw_arguments": "oops"}
    )
    assert call == ToolCall(id="c", name="x", arguments={"a": 1})


@pytest.mark.parametrize("stored", ["", 5, None])
def test_from_dict_ignores_empty_or_non_string_stored_raw(stored):
    call = ToolCall.from_dict({"id": "c", "function": {"name": "x"}, "raw_arguments": stored})
    assert call.raw_arguments is None


def test_from_dict_ignores_unknown_keys():
    call = ToolCall.from_dict({"id": "c", "index": 0, "function": {"name": "x", "strict": True}})
    assert call == ToolCall(id="c", name="x")


def test_from_dict_accepts_both_of_its_own_shapes():
    call = ToolCall(id="c", name="x", arguments={"q": "ä/ö", "n": [1.5, None, True]})
    assert ToolCall.from_dict(call.to_wire()) == call
    assert ToolCall.from_dict(call.to_dict()) == call
    assert ToolCall.from_dict(json.loads(json.dumps(call.to_wire()))) == call


# try_from_dict ----------------------------------------------------------------


def test_try_from_dict_valid():
    data = {"id": "c", "function": {"name": "x", "arguments": '{"a":1}'}}
    assert ToolCall.try_from_dict(data) == ToolCall(id="c", name="x", arguments={"a": 1})


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"id": "c"},
        {"id": "c", "function": {"name": "x", "arguments": [1]}},
        {"id": "c", "type": 1, "function": {"name": "x"}},
        "not a mapping",
        None,
    ],
)
def test_try_from_dict_returns_none_instead_of_raising(data):
    assert ToolCall.try_from_dict(data) is None


def test_try_from_dict_keeps_raw_arguments():
    call = ToolCall.try_from_dict({"id": "c", "function": {"name": "x", "arguments": "{"}})
    assert call is not None
    assert call.raw_arguments == "{"


# The two helpers ----------------------------------------------------------------


def test_encode_arguments():
    assert encode_arguments({}) == "{}"
    assert encode_arguments({"a": "ü", "b": [1, 2]}) == '{"a":"ü","b":[1,2]}'
    with pytest.raises(ValueError):
        encode_arguments({"a": math.nan})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{}", {}),
        ('{"a": 1}', {"a": 1}),
        ("[]", None),
        ("1", None),
        ("", None),
        ("{", None),
        ("NaN", None),
        ('{"a": Infinity}', None),
    ],
)
def test_decode_arguments(text, expected):
    assert decode_arguments(text) == expected
