"""ToolSpec: the name rule, the parameters object and the tools[] entry."""

import dataclasses
import json
from contextlib import contextmanager

import pytest

from conversations.domain import TOOL_NAME_PATTERN, InvalidArgumentError, ToolSpec


@contextmanager
def expect_error(code, field=None):
    """Expect an InvalidArgumentError with exactly this ``code`` and ``field``."""
    with pytest.raises(InvalidArgumentError) as info:
        yield info
    assert (info.value.code, info.value.field) == (code, field), str(info.value)


def test_defaults():
    spec = ToolSpec(name="get_time")
    assert spec.description == ""
    assert spec.parameters == {"type": "object", "properties": {}}


def test_default_parameters_are_not_shared():
    first, second = ToolSpec(name="a"), ToolSpec(name="b")
    assert first.parameters is not second.parameters


def test_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ToolSpec(name="a").name = "b"


@pytest.mark.parametrize("name", ["a", "get_weather", "get-weather", "Tool9", "_", "-", "x" * 64])
def test_valid_names(name):
    assert ToolSpec(name=name).name == name


@pytest.mark.parametrize(
    "name",
    ["", "x" * 65, "get weather", "get.weather", "wetter_für", "a/b", "abc\n", "\nabc", "名前"],
)
def test_invalid_names(name):
    with expect_error("invalid_tool_name", "function/name") as info:
        ToolSpec(name=name)
    assert repr(name) in str(info.value)
    assert TOOL_NAME_PATTERN.pattern in str(info.value)


@pytest.mark.parametrize("name", [None, 5])
def test_non_string_name(name):
    with expect_error("invalid_tool_name", "function/name"):
        ToolSpec(name=name)


def test_description_must_be_a_string():
    with expect_error("invalid_tool_spec", "function/description"):
        ToolSpec(name="a", description=None)


@pytest.mark.parametrize("parameters", [None, [], "{}"])
def test_parameters_must_be_a_mapping(parameters):
    with expect_error("invalid_tool_spec", "function/parameters"):
        ToolSpec(name="a", parameters=parameters)


def test_parameters_type_defaults_to_object():
    spec = ToolSpec(name="a", parameters={"properties": {"q": {"type": "string"}}})
    assert spec.parameters == {"type": "object", "properties": {"q": {"type": "string"}}}


@pytest.mark.parametrize("schema_type", ["array", "string", None])
def test_parameters_must_be_an_object_schema(schema_type):
    with expect_error("invalid_tool_spec", "function/parameters/type") as info:
        ToolSpec(name="a", parameters={"type": schema_type})
    assert repr(schema_type) in str(info.value)


@pytest.mark.parametrize("parameters", [{"type": "object"}, {"type": "object", "properties": []}])
def test_empty_properties_is_always_an_object(parameters):
    spec = ToolSpec(name="a", parameters=parameters)
    assert spec.parameters["properties"] == {}
    assert json.dumps(spec.to_dict()["function"]["parameters"]) == (
        '{"type": "object", "properties": {}}'
    )


@pytest.mark.parametrize("properties", ["x", [{"q": 1}], 3])
def test_properties_must_be_an_object(properties):
    with expect_error("invalid_tool_spec", "function/parameters/properties"):
        ToolSpec(name="a", parameters={"type": "object", "properties": properties})


def test_other_schema_keys_are_kept():
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    assert ToolSpec(name="a", parameters=schema).parameters == schema


def test_parameters_are_a_deep_private_copy():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    spec = ToolSpec(name="a", parameters=schema)
    schema["properties"]["q"]["type"] = "integer"
    assert spec.parameters["properties"]["q"]["type"] == "string"


def test_to_dict():
    spec = ToolSpec(
        name="get_weather",
        description="Current weather",
        parameters={"type": "object", "properties": {"location": {"type": "string"}}},
    )
    data = spec.to_dict()
    assert data == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
    }
    assert list(data) == ["type", "function"]
    assert list(data["function"]) == ["name", "description", "parameters"]


def test_to_dict_returns_a_copy():
    spec = ToolSpec(name="a")
    spec.to_dict()["function"]["parameters"]["properties"]["x"] = {}
    assert spec.parameters == {"type": "object", "properties": {}}


def test_from_dict_round_trip():
    spec = ToolSpec(
        name="search",
        description="Find things",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )
    assert ToolSpec.from_dict(spec.to_dict()) == spec
    assert ToolSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_from_dict_defaults():
    spec = ToolSpec.from_dict({"type": "function", "function": {"name": "a"}})
    assert spec == ToolSpec(name="a")


def test_from_dict_null_description_and_parameters():
    spec = ToolSpec.from_dict({"function": {"name": "a", "description": None, "parameters": None}})
    assert spec == ToolSpec(name="a")


def test_from_dict_properties_list_becomes_object():
    spec = ToolSpec.from_dict({"function": {"name": "a", "parameters": {"properties": []}}})
    assert spec.parameters == {"properties": {}, "type": "object"}


@pytest.mark.parametrize("data", [{}, {"function": "a"}, {"function": None}, None, "a", ["a"]])
def test_from_dict_needs_a_function_object(data):
    with expect_error("invalid_tool_spec", "function"):
        ToolSpec.from_dict(data)


@pytest.mark.parametrize("function", [{}, {"name": None}, {"name": ""}, {"name": "bad name"}])
def test_from_dict_bad_name(function):
    with expect_error("invalid_tool_name", "function/name"):
        ToolSpec.from_dict({"function": function})


def test_from_dict_bad_parameters():
    with expect_error("invalid_tool_spec", "function/parameters"):
        ToolSpec.from_dict({"function": {"name": "a", "parameters": []}})
