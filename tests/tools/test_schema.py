"""Deriving a tool's JSON Schema and description from a typed Python function."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional

import pytest
from jsonschema import Draft202012Validator

from conversations.exceptions import InvalidArgumentError
from conversations.tools import Tool, ToolContext


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def schema_of(func: Any) -> dict[str, Any]:
    return dict(Tool.from_function(func).parameters)


def prop(func: Any, name: str = "x") -> dict[str, Any]:
    return schema_of(func)["properties"][name]


# --- one test per supported hint kind --------------------------------------------


@pytest.mark.parametrize(
    ("hint", "json_type"),
    [(str, "string"), (int, "integer"), (float, "number"), (bool, "boolean")],
)
def test_scalars(hint: type, json_type: str) -> None:
    def f(x): ...

    f.__annotations__ = {"x": hint}
    assert schema_of(f) == {
        "type": "object",
        "properties": {"x": {"type": json_type}},
        "required": ["x"],
        "additionalProperties": False,
    }


def test_literal_becomes_enum() -> None:
    def f(x: Literal["asc", "desc"]) -> None: ...

    assert prop(f) == {"type": "string", "enum": ["asc", "desc"]}


def test_literal_of_mixed_types_lists_each_json_type_once() -> None:
    def f(x: Literal[1, 2, "many", True]) -> None: ...

    assert prop(f) == {"type": ["integer", "string", "boolean"], "enum": [1, 2, "many", True]}


def test_enum_subclass_becomes_enum_of_values() -> None:
    def f(x: Unit, y: Level) -> None: ...

    assert prop(f) == {"type": "string", "enum": ["celsius", "fahrenheit"]}
    assert prop(f, "y") == {"type": "integer", "enum": [1, 2]}


class Odd(enum.Enum):
    A = (1, 2)


def test_enum_with_non_json_values_is_refused_naming_the_parameter() -> None:
    def f(odd: Odd) -> None: ...

    with pytest.raises(TypeError, match="parameter 'odd'"):
        Tool.from_function(f)


def test_list_with_and_without_items() -> None:
    def f(x: list[int], y: list, z: list[Literal["a", "b"]]) -> None: ...

    assert prop(f) == {"type": "array", "items": {"type": "integer"}}
    assert prop(f, "y") == {"type": "array"}
    assert prop(f, "z") == {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}


def test_dict_with_and_without_value_type() -> None:
    def f(x: dict, y: dict[str, float]) -> None: ...

    assert prop(f) == {"type": "object"}
    assert prop(f, "y") == {"type": "object", "additionalProperties": {"type": "number"}}


def test_dict_with_non_string_keys_is_refused() -> None:
    def f(x: dict[int, str]) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'x'.*keys are strings"):
        Tool.from_function(f)


def test_any_is_an_empty_schema() -> None:
    def f(x: Any, y: dict[str, Any]) -> None: ...

    assert prop(f) == {}
    assert prop(f, "y") == {"type": "object", "additionalProperties": {}}


@pytest.mark.parametrize("style", ["pipe", "optional"])
def test_optional_without_default_is_nullable_and_not_required(style: str) -> None:
    if style == "pipe":

        def f(x: str | None) -> None: ...
    else:

        def f(x: Optional[str]) -> None: ...  # noqa: UP045  (the spelling under test)

    schema = schema_of(f)
    assert schema["properties"]["x"] == {"type": ["string", "null"], "default": None}
    assert "required" not in schema


def test_optional_enum_and_literal_accept_null_in_the_enum_too() -> None:
    def f(x: Unit | None = None, y: Literal["a"] | None = None) -> None: ...

    assert prop(f) == {
        "type": ["string", "null"],
        "enum": ["celsius", "fahrenheit", None],
        "default": None,
    }
    assert prop(f, "y") == {"type": ["string", "null"], "enum": ["a", None], "default": None}
    Draft202012Validator.check_schema(schema_of(f))


def test_union_of_several_types_is_any_of() -> None:
    def f(x: int | str, y: int | str | None = None) -> None: ...

    assert prop(f) == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert prop(f, "y") == {
        "anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}],
        "default": None,
    }


def test_defaults_make_a_parameter_optional_and_are_shown() -> None:
    def g(
        a: str,
        b: int = 3,
        c: Unit = Unit.CELSIUS,
        d: list[int] = [1, 2],  # noqa: B006  (never mutated; a schema default)
        e: float = float("nan"),
    ) -> None: ...

    schema = schema_of(g)
    assert schema["required"] == ["a"]
    assert schema["properties"]["b"] == {"type": "integer", "default": 3}
    assert schema["properties"]["c"]["default"] == "celsius"  # the Enum's value
    assert schema["properties"]["d"]["default"] == [1, 2]
    # NaN is not JSON: the parameter stays optional, without a default shown.
    assert schema["properties"]["e"] == {"type": "number"}


def test_none_default_on_a_non_optional_hint_makes_it_nullable() -> None:
    def f(x: str = None) -> None: ...  # type: ignore[assignment]  # noqa: RUF013

    assert prop(f) == {"type": ["string", "null"], "default": None}


def test_annotated_text_becomes_the_description() -> None:
    def f(
        city: Annotated[str, "City name"],
        when: Annotated[str | None, "ISO date", "second text is ignored"] = None,
        tags: list[Annotated[str, "one tag"]] | None = None,
    ) -> None: ...

    assert prop(f, "city") == {"type": "string", "description": "City name"}
    assert prop(f, "when") == {
        "type": ["string", "null"],
        "description": "ISO date",
        "default": None,
    }
    assert prop(f, "tags")["type"] == ["array", "null"]
    assert prop(f, "tags")["items"] == {"type": "string", "description": "one tag"}


def test_annotated_mapping_adds_schema_keywords() -> None:
    def f(n: Annotated[int, "How many", {"minimum": 1, "maximum": 10}] = 1) -> None: ...

    assert prop(f, "n") == {
        "type": "integer",
        "description": "How many",
        "minimum": 1,
        "maximum": 10,
        "default": 1,
    }


def test_no_parameters_gives_an_empty_object() -> None:
    def f() -> str:
        return "ok"

    assert schema_of(f) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_derived_schemas_are_valid_draft_2020_12() -> None:
    def f(
        a: str,
        b: Literal[1, "x"],
        c: list[Unit] | None,
        d: dict[str, list[int]] = {},  # noqa: B006
        e: Annotated[float, {"minimum": 0}] = 0.5,
    ) -> None: ...

    Draft202012Validator.check_schema(schema_of(f))


def test_string_annotations_are_resolved() -> None:
    # This module uses ``from __future__ import annotations``: every hint is a string.
    def f(x: Unit) -> None: ...

    assert isinstance(f.__annotations__["x"], str)
    assert prop(f)["enum"] == ["celsius", "fahrenheit"]


def test_unresolvable_forward_reference_names_the_function() -> None:
    def f(x: DoesNotExist) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(TypeError, match=r"cannot resolve the type hints of .*\.f"):
        Tool.from_function(f)


# --- refusals ------------------------------------------------------------------------


@pytest.mark.parametrize("hint", [bytes, set[int], tuple[int, int], complex, object])
def test_unsupported_hints_are_refused_naming_the_parameter(hint: Any) -> None:
    def f(amount): ...

    f.__annotations__ = {"amount": hint}
    with pytest.raises(TypeError, match=r"parameter 'amount': type hint .* is not supported"):
        Tool.from_function(f)


def test_unsupported_hint_inside_a_list_names_the_parameter() -> None:
    def f(items: list[bytes]) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'items' \(list item\)"):
        Tool.from_function(f)


def test_missing_hint_is_refused() -> None:
    def f(x, y: int) -> None: ...  # type: ignore[no-untyped-def]

    with pytest.raises(TypeError, match="parameter 'x' has no type hint"):
        Tool.from_function(f)


def test_var_args_and_var_kwargs_are_refused() -> None:
    def with_args(*values: int) -> None: ...

    def with_kwargs(**options: str) -> None: ...

    with pytest.raises(TypeError, match=r"\*values is not supported"):
        Tool.from_function(with_args)
    with pytest.raises(TypeError, match=r"\*\*options is not supported"):
        Tool.from_function(with_kwargs)


def test_positional_only_parameters_are_refused() -> None:
    def f(x: int, /) -> None: ...

    with pytest.raises(TypeError, match="positional-only"):
        Tool.from_function(f)


def test_unsupported_hints_are_fine_when_the_schema_is_explicit() -> None:
    def f(data: bytes) -> None: ...

    parameters = {"type": "object", "properties": {"data": {"type": "string"}}}
    tool = Tool.from_function(f, parameters=parameters)
    assert tool.parameters == parameters


# --- explicit schemas ----------------------------------------------------------------


def test_explicit_parameters_override_derivation() -> None:
    def f(city: str, days: int = 1) -> None: ...

    parameters = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 2},
            "days": {"type": "integer", "maximum": 7},
        },
        "required": ["city"],
    }
    tool = Tool.from_function(f, parameters=parameters)
    assert tool.parameters == parameters
    assert tool.spec.parameters == parameters
    parameters["required"].append("days")  # the tool holds its own copy
    assert tool.parameters["required"] == ["city"]


def test_explicit_parameters_are_normalised_like_a_tool_spec() -> None:
    def f() -> None: ...

    assert Tool.from_function(f, parameters={}).parameters == {
        "type": "object",
        "properties": {},
    }


def test_explicit_schema_must_be_valid_json_schema() -> None:
    def f(x: int) -> None: ...

    with pytest.raises(InvalidArgumentError) as info:
        Tool.from_function(f, parameters={"type": "object", "properties": {"x": {"type": 5}}})
    assert info.value.code == "invalid_tool_spec"


def test_explicit_schema_must_be_an_object_schema() -> None:
    def f(x: int) -> None: ...

    with pytest.raises(InvalidArgumentError) as info:
        Tool.from_function(f, parameters={"type": "array"})
    assert info.value.code == "invalid_tool_spec"


def test_explicit_schema_offering_a_property_the_function_lacks_is_refused() -> None:
    def f(x: int) -> None: ...

    schema = {"type": "object", "properties": {"x": {}, "y": {}}}
    with pytest.raises(InvalidArgumentError, match="offers 'y'"):
        Tool.from_function(f, parameters=schema)


def test_explicit_schema_missing_a_required_parameter_is_refused() -> None:
    def f(x: int, y: int) -> None: ...

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    with pytest.raises(InvalidArgumentError, match="requires 'y'"):
        Tool.from_function(f, parameters=schema)


# --- context parameter -----------------------------------------------------------------


def test_context_parameter_is_not_in_the_schema() -> None:
    def f(city: str, context: ToolContext) -> None: ...

    tool = Tool.from_function(f)
    assert tool.takes_context
    assert tool.shape.context_parameter == "context"
    assert list(tool.parameters["properties"]) == ["city"]


def test_optional_context_parameter_is_detected() -> None:
    def f(ctx: ToolContext | None = None) -> None: ...

    tool = Tool.from_function(f)
    assert tool.takes_context
    assert tool.parameters["properties"] == {}


def test_two_context_parameters_are_refused() -> None:
    def f(a: ToolContext, b: ToolContext) -> None: ...

    with pytest.raises(TypeError, match="only one ToolContext"):
        Tool.from_function(f)


def test_without_context_parameter() -> None:
    def f(x: int) -> None: ...

    assert not Tool.from_function(f).takes_context


# --- descriptions -------------------------------------------------------------------------


def test_description_is_the_cleaned_docstring() -> None:
    def f() -> None:
        """Look up the weather.

        Uses bundled data:
            not live.
        """

    assert Tool.from_function(f).description == (
        "Look up the weather.\n\nUses bundled data:\n    not live."
    )


def test_description_stops_at_the_first_docstring_section() -> None:
    def f(city: str) -> None:
        """Look up the weather for a city.

        Args:
            city: the city.

        Returns:
            A dict.
        """

    assert Tool.from_function(f).description == "Look up the weather for a city."


def test_numpy_style_sections_are_dropped_too() -> None:
    def f(city: str) -> None:
        """Look up the weather.

        Parameters
        ----------
        city : str
        """

    assert Tool.from_function(f).description == "Look up the weather."


def test_no_docstring_gives_an_empty_description() -> None:
    def f() -> None: ...

    assert Tool.from_function(f).description == ""


def test_explicit_description_wins() -> None:
    def f() -> None:
        """Docstring."""

    assert Tool.from_function(f, description="Given.").description == "Given."


# --- the tool value ----------------------------------------------------------------------


def test_spec_matches_the_tool() -> None:
    def lookup(city: Annotated[str, "City name"]) -> None:
        """Find a city."""

    tool = Tool.from_function(lookup)
    assert tool.name == "lookup"
    assert tool.spec.to_dict() == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
    assert tool.origin.endswith("test_spec_matches_the_tool.<locals>.lookup")


class Greeter:
    """Greets people."""

    def __call__(self, name: Annotated[str, "Who"], loud: bool = False) -> str:
        return f"Hello {name}" + ("!" if loud else ".")

    def greet(self, name: str) -> str:
        """Greet one person."""
        return f"Hi {name}"


def test_callable_objects_and_bound_methods() -> None:
    greeter = Greeter()
    tool = Tool.from_function(greeter, name="greet")
    assert tool.parameters["properties"] == {
        "name": {"type": "string", "description": "Who"},
        "loud": {"type": "boolean", "default": False},
    }
    assert tool.description == "Greets people."
    assert tool.origin.endswith("test_schema.Greeter")
    method = Tool.from_function(greeter.greet)
    assert method.name == "greet"
    assert list(method.parameters["properties"]) == ["name"]  # no self
    assert method.description == "Greet one person."


def test_tool_is_frozen() -> None:
    def f() -> None: ...

    tool = Tool.from_function(f)
    with pytest.raises(AttributeError):
        tool.name = "other"  # type: ignore[misc]


def test_non_string_description_is_refused() -> None:
    def f() -> None: ...

    with pytest.raises(InvalidArgumentError) as info:
        Tool(name="f", description=3, parameters={}, func=f)  # type: ignore[arg-type]
    assert info.value.code == "invalid_tool_spec"
