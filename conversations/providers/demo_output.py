"""The offline demo's structured answers: a value that satisfies the schema it was asked for.

The demo model has no understanding of the text; it builds the simplest value
each keyword allows (the first ``enum`` member, ``const``, ``minimum``, the
required properties, ``minItems`` items...). :data:`SAMPLE_SCHEMAS` are
schemas it is documented to answer, so structured output can be shown offline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["SAMPLE_SCHEMAS", "sample_value"]

SAMPLE_SCHEMAS: Final[Mapping[str, Mapping[str, Any]]] = {
    "sentiment": {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["positive", "neutral", "negative"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["label", "confidence"],
        "additionalProperties": False,
    },
    "invoice": {
        "type": "object",
        "properties": {
            "number": {"type": "string"},
            "total": {"type": "number", "minimum": 0},
            "lines": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"item": {"type": "string"}, "amount": {"type": "number"}},
                    "required": ["item", "amount"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["number", "total", "lines"],
        "additionalProperties": False,
    },
}
"""Schemas the demo answers with valid JSON (any schema of these keywords works)."""

_MAX_DEPTH: Final = 32
_STRINGS: Final = {
    "date": "2026-01-01",
    "date-time": "2026-01-01T00:00:00Z",
    "email": "a@b.example",
}


def sample_value(schema: Any, root: Any = None, depth: int = 0) -> Any:
    """The simplest value ``schema`` accepts (local ``$ref`` followed, recursion bounded)."""
    root = schema if root is None else root
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/"):
        target: Any = root
        for part in reference[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {})
        return sample_value(target, root, depth + 1)
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return sample_value(schema[key][0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        # Deep in a recursive schema only the required properties are filled in.
        names = schema.get("required") or (list(properties) if depth < 4 else [])
        return {name: sample_value(properties.get(name, {}), root, depth + 1) for name in names}
    if kind == "array":
        count = int(schema.get("minItems") or (1 if depth < 4 else 0))
        return [sample_value(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if kind in ("number", "integer"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = low + 1 if "exclusiveMinimum" in schema and "minimum" not in schema else low
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if kind == "string":
        text = _STRINGS.get(str(schema.get("format")), "demo")
        return text.ljust(int(schema.get("minLength") or 0), "x")
    return None
