"""Storable text and JSON, and the JSON helpers that work at any nesting depth."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conversations.domain import InvalidArgumentError, ToolCall
from conversations.domain.storable import (
    DEFAULT_MAX_ARGUMENTS_DEPTH,
    REPLACEMENT,
    dumps_compact,
    json_depth,
    loads_deep,
    max_arguments_depth,
    set_max_arguments_depth,
    storable_json,
    storable_text,
    text_depth_excess,
)

from ..strategies import json_values

DEEP = 3000
"""Deeper than the interpreter's recursion limit allows ``json`` to go."""


@pytest.fixture
def depth_limit():
    """Restores the arguments depth a test changes."""
    yield set_max_arguments_depth
    set_max_arguments_depth(DEFAULT_MAX_ARGUMENTS_DEPTH)


# Text and JSON made storable ------------------------------------------------------------


def test_nul_and_lone_surrogates_become_the_replacement_character():
    assert storable_text("a\x00b\ud800c\udfff") == (
        f"a{REPLACEMENT}b{REPLACEMENT}c{REPLACEMENT}",
        True,
    )
    assert storable_text("plain ü ✓") == ("plain ü ✓", False)


def test_json_is_copied_with_its_strings_and_keys_made_storable():
    value = {"k\x00": ["a\ud800", ("t", 1)], "ok": {"n": None, "f": 1.5}}
    cleaned, changed = storable_json(value)
    assert changed
    assert cleaned == {
        f"k{REPLACEMENT}": [f"a{REPLACEMENT}", ["t", 1]],
        "ok": {"n": None, "f": 1.5},
    }
    assert value["k\x00"][0] == "a\ud800"  # the original is left alone


def test_storable_json_reports_no_change_for_clean_values():
    assert storable_json({"a": [1, "b"]}) == ({"a": [1, "b"]}, False)
    assert storable_json("text") == ("text", False)


def test_storable_json_handles_any_depth():
    value: object = "x\x00"
    for _ in range(DEEP):
        value = [value]
    cleaned, changed = storable_json(value)
    assert changed and json_depth(cleaned) == DEEP


# Depth ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "depth"),
    [(1, 0), ("s", 0), ({}, 1), ([], 1), ({"a": [1, {"b": {}}]}, 4), ((1, (2,)), 2)],
)
def test_json_depth(value, depth):
    assert json_depth(value) == depth


def test_json_depth_without_recursion():
    assert json_depth(json.loads("[" * 500 + "]" * 500)) == 500
    assert json_depth(loads_deep("[" * DEEP + "]" * DEEP)) == DEEP


@pytest.mark.parametrize(
    ("text", "limit", "path"),
    [
        ('{"a": 1}', 1, None),
        ('{"a": {"b": 1}}', 1, ["a"]),
        ('{"a": 1, "b": [1, [2]]}', 2, ["b", 1]),
        ('[0, 1, {"k\\"ey": [[]]}]', 3, [2, 'k"ey', 0]),
        ('{"x": "}]{[", "y": [1]}', 1, ["y"]),
        ('{"a\\u00e9": {}}', 1, ["aé"]),
        ('{"bad\\x": {}}', 1, ["bad\\x"]),
        ("]]}{", 1, None),
        ("not json", 1, None),
    ],
)
def test_text_depth_excess_names_the_path_of_the_first_container_too_deep(text, limit, path):
    assert text_depth_excess(text, limit) == path


def test_the_arguments_depth_can_be_set_and_is_validated(depth_limit):
    assert max_arguments_depth() == DEFAULT_MAX_ARGUMENTS_DEPTH
    depth_limit(3)
    assert max_arguments_depth() == 3
    for bad in (0, -1, True, 2.5, "3"):
        with pytest.raises(ValueError, match="positive integer"):
            depth_limit(bad)
    assert max_arguments_depth() == 3


def test_arguments_deeper_than_the_limit_are_kept_raw_and_never_decoded(depth_limit):
    depth_limit(2)
    call = ToolCall("call_1", "f", {"a": {"b": {"c": 1}}})
    assert call.arguments == {}
    assert call.raw_arguments == '{"a":{"b":{"c":1}}}'
    assert ToolCall("call_2", "f", {"a": {"b": 1}}).arguments == {"a": {"b": 1}}


def test_too_deep_arguments_that_are_not_json_are_refused(depth_limit):
    depth_limit(1)
    with pytest.raises(InvalidArgumentError) as info:
        ToolCall("call_1", "f", {"a": {"b": {1, 2}}})
    assert info.value.code == "invalid_arguments"
    assert info.value.field == "function/arguments"


# dumps_compact and loads_deep agree with the json module -------------------------------


@given(json_values())
def test_dumps_compact_writes_what_json_dumps_writes(value):
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert dumps_compact(value) == expected


@given(json_values())
def test_loads_deep_reads_what_json_loads_reads(value):
    for text in (
        json.dumps(value),
        json.dumps(value, indent=2),
        json.dumps(value, separators=(",", ":")),
    ):
        assert loads_deep(text) == json.loads(text)


def test_dumps_compact_and_loads_deep_work_at_any_depth():
    text = '{"a":' * DEEP + "[1, 2.5e3, true, false, null]" + "}" * DEEP
    value = loads_deep(text)
    assert json_depth(value) == DEEP + 1
    assert dumps_compact(value) == text.replace(", ", ",").replace("2.5e3", "2500.0")


def test_dumps_compact_refuses_what_json_refuses():
    with pytest.raises(TypeError, match="keys must be strings"):
        dumps_compact({1: "a"})
    with pytest.raises(ValueError):
        dumps_compact([float("nan")])
    assert dumps_compact(("a", ())) == '["a",[]]'


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "{",
        "[1,",
        '{"a" 1}',
        "{1: 2}",
        '{"a": 1,}',
        "[1 2]",
        '{"a": 1]',
        "tru",
        "@",
        "1 2",
        '"unterminated',
    ],
)
def test_loads_deep_refuses_text_that_is_not_json(text):
    with pytest.raises(ValueError):
        loads_deep(text)
    with pytest.raises(ValueError):
        json.loads(text)


@given(st.integers() | st.floats(allow_nan=False, allow_infinity=False))
def test_loads_deep_reads_numbers_as_json_does(number):
    text = json.dumps(number)
    assert loads_deep(text) == json.loads(text)
    assert type(loads_deep(text)) is type(json.loads(text))


def test_argument_text_nested_too_deeply_is_kept_raw(depth_limit):
    depth_limit(2)
    call = ToolCall.from_dict(
        {"id": "call_1", "function": {"name": "f", "arguments": '{"a": {"b": {}}}'}}
    )
    assert call.arguments == {}
    assert call.raw_arguments == '{"a": {"b": {}}}'
