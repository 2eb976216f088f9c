"""Turn a typed Python function into a JSON Schema, a description and argument converters.

Everything here is introspection of a callable at decoration time; nothing runs
per call except the converters it returns. The supported hints, and what the
model sees for each:

- ``str``, ``int``, ``float``, ``bool``: ``{"type": "string"}`` and so on
- ``Literal["a", "b"]``: ``{"type": "string", "enum": ["a", "b"]}``
- an ``Enum`` subclass: ``{"type": ..., "enum": [the members' values]}``
- ``list`` / ``list[X]``: ``{"type": "array", "items": <X>}``
- ``dict`` / ``dict[str, X]``: ``{"type": "object", "additionalProperties": <X>}``
- ``Any``: ``{}`` (anything)
- ``X | None`` / ``Optional[X]``: ``<X>`` also accepting ``null``; not required
- ``X | Y``: ``{"anyOf": [<X>, <Y>]}``
- ``Annotated[X, "text"]``: ``<X>`` with ``"description": "text"``
- ``Annotated[X, {"minimum": 0}]``: ``<X>`` with those keywords merged in

A parameter with a default is not required; its default appears in the schema
when it is JSON-serialisable. A parameter annotated :class:`ToolContext` is
filled by the loop, never by the model, and does not appear in the schema.
"""

from __future__ import annotations

import enum
import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from .context import ToolContext

__all__ = [
    "FunctionShape",
    "ParameterShape",
    "derive_converters",
    "derive_parameters",
    "describe_function",
    "inspect_function",
    "is_async_callable",
    "qualified_name",
]

Converter = Callable[[Any], Any]
"""Turns a validated JSON value into what the Python function expects."""

_SCALARS: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_JSON_TYPE_OF_VALUE: tuple[tuple[type, str], ...] = (
    # bool before int: True is an int to Python but a boolean to JSON Schema.
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (type(None), "null"),
)
# Headings that start the structured part of a Google/NumPy-style docstring;
# the model reads argument descriptions from the schema, not from prose.
_DOCSTRING_SECTIONS = frozenset(
    {
        "args:",
        "arguments:",
        "parameters:",
        "parameters",
        "params:",
        "returns:",
        "returns",
        "return:",
        "raises:",
        "raises",
        "yields:",
        "examples:",
        "example:",
        "note:",
        "notes:",
    }
)


@dataclass(frozen=True, slots=True)
class ParameterShape:
    """One parameter the model may fill, as read from the signature."""

    name: str
    """The keyword the function is called with."""
    hint: Any
    """The resolved type hint (``inspect.Parameter.empty`` when there is none)."""
    required: bool
    """True when the model must pass it: no default and not ``Optional``."""
    default: Any
    """The signature's default (``inspect.Parameter.empty`` when there is none)."""
    fill_none: bool = False
    """``Optional`` without a default: omitted means the call passes ``None``.

    The schema calls such a parameter optional, so omitting it must not make the
    call fail with a missing-argument ``TypeError``."""


@dataclass(frozen=True, slots=True)
class FunctionShape:
    """What a callable's signature says about how a tool calls it."""

    qualified_name: str
    """``module.qualname``: how errors and duplicate reports name the function."""
    parameters: tuple[ParameterShape, ...]
    """The model-facing parameters, in signature order."""
    context_parameter: str | None
    """The name of the :class:`ToolContext` parameter, if the function takes one."""

    @property
    def accepted(self) -> frozenset[str]:
        """Names the model may pass."""
        return frozenset(p.name for p in self.parameters)

    @property
    def required(self) -> frozenset[str]:
        """Names the model must pass."""
        return frozenset(p.name for p in self.parameters if p.required)

    @property
    def filled_with_none(self) -> frozenset[str]:
        """Optional names without a default: passed as ``None`` when omitted."""
        return frozenset(p.name for p in self.parameters if p.fill_none)


def qualified_name(func: Callable[..., Any]) -> str:
    """``module.qualname`` of a callable, for messages and duplicate detection."""
    module = getattr(func, "__module__", None) or "<unknown module>"
    qualname = getattr(func, "__qualname__", None) or type(func).__qualname__
    return f"{module}.{qualname}"


def is_async_callable(func: Callable[..., Any]) -> bool:
    """Whether ``func`` is an ``async def`` function (or an object whose ``__call__`` is)."""
    if inspect.iscoroutinefunction(func):
        return True
    # For an instance, the hook is the class's ``__call__`` (as for the hints below).
    return not inspect.isroutine(func) and inspect.iscoroutinefunction(type(func).__call__)


def _resolve_hints(func: Callable[..., Any], where: str) -> dict[str, Any]:
    # A callable object keeps its hints on ``__call__``, not on the instance.
    annotated = func if inspect.isroutine(func) else type(func).__call__
    try:
        return typing.get_type_hints(annotated, include_extras=True)
    except (NameError, TypeError) as exc:
        # A forward reference that does not resolve: say which function, or the
        # author is left guessing which of their tools broke startup.
        raise TypeError(f"cannot resolve the type hints of {where}: {exc}") from exc


def _is_context_hint(hint: Any) -> bool:
    hint = _strip_annotated(hint)[0]
    if hint is ToolContext:
        return True
    if _is_union(hint):
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        return len(members) == 1 and members[0] is ToolContext
    return False


def inspect_function(func: Callable[..., Any]) -> FunctionShape:
    """Read the model-facing parameters of ``func``; refuse shapes a tool cannot have.

    Raises :class:`TypeError` for ``*args``/``**kwargs``, positional-only
    parameters, async generators and more than one context parameter: each would
    fail only at call time otherwise, long after the author could notice.
    An ``async def`` function is read like any other (the loop awaits it).
    """
    where = qualified_name(func)
    if not callable(func):
        raise TypeError(f"a tool must be callable, got {func!r}")
    if inspect.isasyncgenfunction(func):
        raise TypeError(f"{where} is an async generator; a tool returns one result")
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot read the signature of {where}: {exc}") from exc
    hints = _resolve_hints(func, where)
    parameters: list[ParameterShape] = []
    context_parameter: str | None = None
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(f"{where}: *{parameter.name} is not supported in a tool")
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(f"{where}: **{parameter.name} is not supported in a tool")
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"{where}: parameter {parameter.name!r} is positional-only; "
                "tools are called with keyword arguments"
            )
        hint = hints.get(parameter.name, inspect.Parameter.empty)
        if _is_context_hint(hint):
            if context_parameter is not None:
                raise TypeError(
                    f"{where}: only one ToolContext parameter is allowed "
                    f"({context_parameter!r} and {parameter.name!r})"
                )
            context_parameter = parameter.name
            continue
        no_default = parameter.default is inspect.Parameter.empty
        nullable = _is_nullable(hint)
        parameters.append(
            ParameterShape(
                name=parameter.name,
                hint=hint,
                required=no_default and not nullable,
                default=parameter.default,
                fill_none=no_default and nullable,
            )
        )
    return FunctionShape(
        qualified_name=where,
        parameters=tuple(parameters),
        context_parameter=context_parameter,
    )


def describe_function(func: Callable[..., Any]) -> str:
    """The tool description from a docstring: its prose, up to the first section heading.

    ``Args:``/``Returns:``-style sections are dropped because parameter
    descriptions belong in the schema (``Annotated``), where the model looks for
    them; the prose keeps its paragraphs.
    """
    doc = inspect.getdoc(func)
    if not doc:
        return ""
    kept: list[str] = []
    for line in inspect.cleandoc(doc).splitlines():
        if line.strip().lower() in _DOCSTRING_SECTIONS:
            break
        kept.append(line.rstrip())
    return "\n".join(kept).strip()


# --- hints -> schema ---------------------------------------------------------------


def _is_union(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    return origin is Union or origin is types.UnionType


def _is_nullable(hint: Any) -> bool:
    hint = _strip_annotated(hint)[0]
    return _is_union(hint) and type(None) in typing.get_args(hint)


def _strip_annotated(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """Unwrap (possibly nested) ``Annotated``; return the bare hint and all metadata."""
    metadata: list[Any] = []
    while typing.get_origin(hint) is Annotated:
        metadata[:0] = hint.__metadata__
        hint = typing.get_args(hint)[0]
    return hint, tuple(metadata)


def _json_type(value: Any, where: str) -> str:
    for python_type, json_type in _JSON_TYPE_OF_VALUE:
        if isinstance(value, python_type):
            # Exclude bool from int/float matching: isinstance(True, int) holds.
            if python_type is not bool and isinstance(value, bool):
                continue
            return json_type
    raise TypeError(f"{where}: {value!r} is not a JSON value (str, int, float, bool or None)")


def _enum_schema(values: list[Any], where: str) -> dict[str, Any]:
    if not values:
        raise TypeError(f"{where}: an enumeration needs at least one value")
    kinds: list[str] = []
    for value in values:
        kind = _json_type(value, where)
        if kind not in kinds:
            kinds.append(kind)
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": values}


def _make_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """Let ``schema`` also accept ``null`` in the most compact form it allows."""
    result = dict(schema)
    if "anyOf" in result:
        if {"type": "null"} not in result["anyOf"]:
            result["anyOf"] = [*result["anyOf"], {"type": "null"}]
        return result
    if "type" not in result:
        return result  # {} already accepts null
    kinds = result["type"] if isinstance(result["type"], list) else [result["type"]]
    if "null" not in kinds:
        result["type"] = [*kinds, "null"]
    if "enum" in result and None not in result["enum"]:
        result["enum"] = [*result["enum"], None]
    return result


def _apply_metadata(schema: dict[str, Any], metadata: tuple[Any, ...]) -> dict[str, Any]:
    result = dict(schema)
    for item in metadata:
        if isinstance(item, str):
            # The first text wins; later strings are treated as notes for humans.
            result.setdefault("description", inspect.cleandoc(item))
        elif isinstance(item, Mapping):
            result.update(item)
        # Other metadata (e.g. validators of other libraries) is not ours to read.
    return result


def _schema_for(hint: Any, where: str) -> dict[str, Any]:
    """The JSON Schema of one hint; :class:`TypeError` naming ``where`` if unsupported."""
    hint, metadata = _strip_annotated(hint)
    return _apply_metadata(_bare_schema(hint, where), metadata)


def _bare_schema(hint: Any, where: str) -> dict[str, Any]:
    if hint is inspect.Parameter.empty:
        raise TypeError(f"{where} has no type hint; tools need one to build the schema")
    if hint is Any:
        return {}
    if isinstance(hint, type) and hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([member.value for member in hint], where)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        return _enum_schema(list(args), where)
    if _is_union(hint):
        members = [m for m in args if m is not type(None)]
        nullable = len(members) < len(args)
        if len(members) == 1:
            schema = _schema_for(members[0], where)
        else:
            schema = {"anyOf": [_schema_for(m, where) for m in members]}
        return _make_nullable(schema) if nullable else schema
    if hint is list or origin is list:
        if not args:
            return {"type": "array"}
        return {"type": "array", "items": _schema_for(args[0], f"{where} (list item)")}
    if hint is dict or origin is dict:
        if not args:
            return {"type": "object"}
        key, value = args
        if _strip_annotated(key)[0] is not str:
            raise TypeError(f"{where}: JSON object keys are strings, got dict[{key!r}, ...]")
        return {
            "type": "object",
            "additionalProperties": _schema_for(value, f"{where} (dict value)"),
        }
    raise TypeError(
        f"{where}: type hint {hint!r} is not supported "
        "(use str, int, float, bool, Literal, an Enum, list, dict, Optional or Annotated; "
        "or give the schema explicitly with @tool(parameters=...))"
    )


def _json_default(value: Any) -> tuple[bool, Any]:
    """``(True, json value)`` when ``value`` can be shown to the model as a default."""
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False, None
    return True, value


def derive_parameters(shape: FunctionShape) -> dict[str, Any]:
    """The JSON Schema object of a function's model-facing parameters.

    ``additionalProperties`` is ``false`` because the function would reject an
    unknown keyword anyway; saying so up front lets the model correct itself.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in shape.parameters:
        where = f"{shape.qualified_name}: parameter {parameter.name!r}"
        schema = _schema_for(parameter.hint, where)
        if parameter.required:
            required.append(parameter.name)
        elif parameter.fill_none:
            schema["default"] = None
        else:
            if parameter.default is None:
                # ``x: str = None``: the default itself must validate.
                schema = _make_nullable(schema)
            serialisable, value = _json_default(parameter.default)
            if serialisable:
                schema["default"] = value
        properties[parameter.name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    result["additionalProperties"] = False
    return result


# --- JSON values -> Python values ----------------------------------------------------


def _to_enum(enum_type: type[enum.Enum]) -> Converter:
    def convert(value: Any) -> Any:
        return value if isinstance(value, enum_type) else enum_type(value)

    return convert


def _to_int(value: Any) -> Any:
    # JSON Schema counts 3.0 as an integer; the function was promised an int.
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _or_none(inner: Converter) -> Converter:
    def convert(value: Any) -> Any:
        return None if value is None else inner(value)

    return convert


def _each_item(inner: Converter) -> Converter:
    def convert(value: Any) -> Any:
        return [inner(v) for v in value] if isinstance(value, list) else value

    return convert


def _each_value(inner: Converter) -> Converter:
    def convert(value: Any) -> Any:
        return {k: inner(v) for k, v in value.items()} if isinstance(value, dict) else value

    return convert


def _converter_for(hint: Any) -> Converter | None:
    """How to turn a valid JSON value into the hinted Python value; None for as-is.

    Lenient by design: a hint this module cannot derive a schema for (possible
    when the schema was given explicitly) simply gets no conversion.
    """
    hint = _strip_annotated(hint)[0]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _to_enum(hint)
    if hint is int:
        return _to_int
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if _is_union(hint):
        members = [m for m in args if m is not type(None)]
        if len(members) != 1:
            return None  # ambiguous: which member would a value convert to?
        inner = _converter_for(members[0])
        return None if inner is None else _or_none(inner)
    if origin is list and args:
        inner = _converter_for(args[0])
        return None if inner is None else _each_item(inner)
    if origin is dict and len(args) == 2:
        inner = _converter_for(args[1])
        return None if inner is None else _each_value(inner)
    return None


def derive_converters(shape: FunctionShape) -> dict[str, Converter]:
    """Converters for the parameters that need one (Enums, ints, containers of them)."""
    converters: dict[str, Converter] = {}
    for parameter in shape.parameters:
        if parameter.hint is inspect.Parameter.empty:
            continue
        converter = _converter_for(parameter.hint)
        if converter is not None:
            converters[parameter.name] = converter
    return converters
