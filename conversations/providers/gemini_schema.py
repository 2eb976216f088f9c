"""JSON Schema -> the OpenAPI 3.0 subset Gemini's ``functionDeclarations.parameters`` accepts.

Gemini answers HTTP 400 to any schema keyword outside its subset
(``additionalProperties``, ``$schema``, ``const``, ...), to an object with
empty ``properties``, to an array without ``items`` and to ``required`` names
that are not properties. :func:`gemini_parameters` rewrites a tool's schema
into that subset, moving what the model should still know into descriptions.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["SchemaNotExpressible", "gemini_parameters"]

Schema = dict[str, Any]


_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "array", "object"})
_FORMATS: Final[Mapping[str, frozenset[str]]] = {
    "string": frozenset({"enum", "date-time"}),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}
# Copied unchanged. Everything else is dropped: Gemini's ``parameters`` is an
# OpenAPI 3.0 subset and answers 400 to any keyword outside it
# (additionalProperties, $schema, const, exclusiveMinimum, propertyNames, ...).
_KEPT: Final = (
    "nullable",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "propertyOrdering",
)
_DEFAULT_ITEMS: Final[Schema] = {"type": "string"}
_REF: Final = re.compile(r"#/(?:\$defs|definitions)/(.+)")


class SchemaNotExpressible(Exception):
    """A schema the OpenAPI subset cannot hold (a recursive or external ``$ref``)."""


def _resolve(
    node: Mapping[str, Any], defs: Mapping[str, Any], trail: tuple[str, ...]
) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """Inline local ``$ref`` s (Gemini has none); siblings of a ``$ref`` win."""
    while isinstance(node.get("$ref"), str):
        found = _REF.fullmatch(node["$ref"])
        name = found.group(1).replace("~1", "/").replace("~0", "~") if found else None
        if name is None or not isinstance(defs.get(name), Mapping):
            raise SchemaNotExpressible(f"unresolvable $ref {node['$ref']!r}")
        if name in trail:
            raise SchemaNotExpressible(f"recursive $ref {node['$ref']!r}")
        trail = (*trail, name)
        node = {**defs[name], **{key: value for key, value in node.items() if key != "$ref"}}
    return node, trail


def _merge(target: Schema, source: Schema) -> None:
    """Fold a converted subschema in: properties and required unite, the rest fills gaps."""
    for key, value in source.items():
        if key == "properties":
            target.setdefault("properties", {}).update(value)
        elif key == "required":
            target.setdefault("required", []).extend(value)
        else:
            target.setdefault(key, value)


def _apply_type(target: Schema, declared: Any) -> None:
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list):
        return
    names = [name.lower() for name in names if isinstance(name, str)]
    if "null" in names:
        target["nullable"] = True  # OpenAPI 3.0 has no "null" type
    real = [name for name in names if name in _TYPES]
    if len(real) == 1:
        target["type"] = real[0]
    elif real:
        target["anyOf"] = [{"type": name} for name in real]


def _convert(
    node: Any, defs: Mapping[str, Any], trail: tuple[str, ...], *, tidy: bool = True
) -> Schema:
    """One schema node converted; ``tidy=False`` for a part that is merged into another."""
    if not isinstance(node, Mapping):
        return {}  # a boolean schema: anything goes
    node, trail = _resolve(node, defs, trail)
    out: Schema = {}
    hints: list[str] = []
    for sub in node.get("allOf") or ():
        _merge(out, _convert(sub, defs, trail, tidy=False))
    _apply_type(out, node.get("type"))
    variants = node.get("anyOf") or node.get("oneOf")
    if isinstance(variants, list):
        kept: list[Any] = []
        for variant in variants:
            if isinstance(variant, Mapping) and variant.get("type") == "null":
                out["nullable"] = True  # Optional[X] is anyOf [X, null]
            else:
                kept.append(variant)
        if len(kept) == 1:
            _merge(out, _convert(kept[0], defs, trail, tidy=False))
        elif kept:
            out["anyOf"] = [_convert(variant, defs, trail) for variant in kept]
    properties = node.get("properties")
    if isinstance(properties, Mapping) and properties:
        out.setdefault("properties", {}).update(
            {str(name): _convert(sub, defs, trail) for name, sub in properties.items()}
        )
    required = node.get("required")
    if isinstance(required, list):
        out.setdefault("required", []).extend(r for r in required if isinstance(r, str))
    items = node.get("items")
    if isinstance(items, list):
        items = items[0] if items else None  # tuple form: the first shape stands for all
    if isinstance(items, Mapping):
        out["items"] = _convert(items, defs, trail)
    if out.get("type") == "array" and not out.get("items"):
        out["items"] = dict(_DEFAULT_ITEMS)  # "items: missing field" otherwise
    values = [node["const"]] if "const" in node else node.get("enum")
    if isinstance(values, list) and values:
        if all(isinstance(value, str) for value in values):
            out["enum"] = list(values)
            out.setdefault("type", "string")  # Gemini's enums are string enums
        else:  # Gemini's enum holds strings only; tell the model in words instead
            hints.append("one of: " + ", ".join(json.dumps(value) for value in values))
    fmt = node.get("format")
    if isinstance(fmt, str):
        if fmt in _FORMATS.get(out.get("type", ""), frozenset()):
            out["format"] = fmt
        elif out.get("type") == "string":
            hints.append(f"format: {fmt}")
    if "default" in node:
        hints.append(f"default: {json.dumps(node['default'])}")
    for key in _KEPT:
        if key in node:
            out[key] = copy.deepcopy(node[key])
    description = node.get("description")
    text = description if isinstance(description, str) else ""
    if hints:
        note = "; ".join(hints)
        text = f"{text} ({note})" if text else note
    if text:
        out["description"] = text
    return _tidy(out) if tidy else out


def _tidy(out: Schema) -> Schema:
    # Empty properties are a 400 ("should be non-empty for OBJECT type"), and
    # required names must exist among the properties.
    properties = out.get("properties") or {}
    if properties and "type" not in out:
        out["type"] = "object"
    required = [name for name in dict.fromkeys(out.pop("required", [])) if name in properties]
    if not properties:
        out.pop("properties", None)
    if required:
        out["required"] = required
    return out


def gemini_parameters(schema: Mapping[str, Any]) -> Schema | None:
    """A tool's JSON Schema in the OpenAPI subset Gemini's ``parameters`` accepts.

    ``None`` when the tool takes no arguments (``parameters`` is then omitted:
    an object with empty ``properties`` is a 400). Keywords outside the subset
    are dropped; what the model should still know is moved into the
    description (``format`` other than ``enum``/``date-time``, ``default``,
    non-string ``enum``/``const``). Local ``$ref`` s are inlined, ``type``
    lists become ``nullable``/``anyOf``, ``oneOf`` becomes ``anyOf``, ``allOf``
    is merged, arrays get ``items``. Raises :class:`SchemaNotExpressible` for a
    recursive or unresolvable ``$ref``.
    """
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        found = schema.get(key)
        if isinstance(found, Mapping):
            defs.update(found)
    converted = _convert(schema, defs, ())
    return converted if converted.get("properties") else None
