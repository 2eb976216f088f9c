"""Structured output: a JSON Schema the final answer must satisfy, checked and applied here.

Pure Python (``jsonschema``, no Django): the canonical form and digest of a
schema, the checks a schema passes before it is stored or sent (size,
depth, only local ``$ref``, a valid Draft 2020-12 schema), the validation of
an answer against it, and whether it lies inside OpenAI's strict subset.
Every problem is reported with the JSON pointer of where it is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from conversations.exceptions import InvalidArgumentError

__all__ = [
    "DEFAULT_MAX_SCHEMA_BYTES",
    "OutputCheck",
    "OutputSpec",
    "canonical_json",
    "check_output",
    "check_schema",
    "json_pointer",
    "schema_sha256",
    "strict_subset_problem",
]

DEFAULT_MAX_SCHEMA_BYTES: Final = 64 * 1024
"""Largest schema (canonical JSON, UTF-8 bytes) accepted when no other limit is given."""
DEFAULT_MAX_DEPTH: Final = 64
_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]+")


def canonical_json(value: Any) -> str:
    """``value`` as compact JSON with sorted keys: one text per schema, whoever wrote it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_sha256(schema: Mapping[str, Any]) -> str:
    """The hex sha256 of the schema's canonical JSON: its identity across runs and users."""
    return hashlib.sha256(canonical_json(schema).encode()).hexdigest()


def json_pointer(path: Any) -> str:
    """The JSON pointer (RFC 6901) of a sequence of keys and indexes; ``""`` is the root."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _depth_problem(value: Any, limit: int) -> str | None:
    """The pointer of the first container nested deeper than ``limit``, else ``None``.

    Walks with an explicit stack: a hostile value must not exhaust Python's recursion.
    """
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    while stack:
        current, depth, path = stack.pop()
        items: Iterator[tuple[Any, Any]]
        if isinstance(current, Mapping):
            items = iter(current.items())
        elif isinstance(current, list):
            items = iter(enumerate(current))
        else:
            continue
        if depth > limit:
            return json_pointer(path)
        stack.extend((child, depth + 1, (*path, key)) for key, child in items)
    return None


def _remote_reference(schema: Any) -> tuple[str, str] | None:
    """The pointer and value of the first ``$ref`` that leaves the document, else ``None``."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(schema, ())]
    while stack:
        current, path = stack.pop()
        if isinstance(current, Mapping):
            for key in ("$ref", "$dynamicRef"):
                target = current.get(key)
                if isinstance(target, str) and not target.startswith("#"):
                    return json_pointer((*path, key)), target
            stack.extend((child, (*path, key)) for key, child in current.items())
        elif isinstance(current, list):
            stack.extend((child, (*path, index)) for index, child in enumerate(current))
    return None


def _no_retrieval(uri: str) -> Any:
    # Never fetch: a schema naming a URL would make the server a proxy to it.
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs class the stubs miss


_OFFLINE = Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]


def _invalid(message: str, pointer: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, code="invalid_schema", field=pointer)


def check_schema(
    schema: Any, *, max_bytes: int = DEFAULT_MAX_SCHEMA_BYTES, max_depth: int = DEFAULT_MAX_DEPTH
) -> dict[str, Any]:
    """``schema`` checked to be a usable output schema; returns it as a plain dict.

    Raises :class:`InvalidArgumentError` (code ``invalid_schema``) whose
    ``field`` is the JSON pointer of the problem inside the schema: not an
    object, over ``max_bytes``, nested deeper than ``max_depth``, a ``$ref``
    to another document (never fetched), or not a valid Draft 2020-12 schema.
    Recursive schemas (a local ``$ref`` to an enclosing part) are fine.
    """
    if not isinstance(schema, Mapping):
        raise _invalid(f"an output schema must be a JSON object, got {type(schema).__name__}", "")
    pointer = _depth_problem(schema, max_depth)
    if pointer is not None:
        raise _invalid(f"the schema is nested deeper than {max_depth} levels", pointer)
    size = len(canonical_json(schema).encode())
    if size > max_bytes:
        raise _invalid(f"the schema is {size} bytes; at most {max_bytes} are accepted", "")
    remote = _remote_reference(schema)
    if remote is not None:
        raise _invalid(
            f"$ref {remote[1]!r} points outside the schema; only local references (#...) "
            "are accepted",
            remote[0],
        )
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise _invalid(f"not a valid JSON Schema: {exc.message}", json_pointer(exc.path)) from None
    return json.loads(json.dumps(schema))  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """The schema a run's final answer must satisfy, as a request carries it."""

    schema: Mapping[str, Any]
    """The JSON Schema (already checked by :func:`check_schema`)."""
    name: str = "output"
    """A short name (OpenAI requires one: letters, digits, ``_`` and ``-``, at most 64)."""
    sha256: str = field(default="")
    """The schema's digest (computed when not given)."""

    def __post_init__(self) -> None:
        if not isinstance(self.schema, Mapping):
            raise _invalid("an output schema must be a JSON object", "")
        name = _NAME_CHARACTERS.sub("_", self.name or "output").strip("_")[:64] or "output"
        object.__setattr__(self, "name", name)
        if not self.sha256:
            object.__setattr__(self, "sha256", schema_sha256(self.schema))


@dataclass(frozen=True, slots=True)
class OutputCheck:
    """What validating an answer found: the value, or where and why it failed."""

    value: Any = None
    valid: bool = False
    pointer: str = ""
    """The JSON pointer of the failing part of the answer (``""``: the whole answer)."""
    error: str = ""

    def describe(self) -> str:
        """The failure in one line, pointer first (what the repair turn and the run say)."""
        where = self.pointer or "the root"
        return f"at {where}: {self.error}"


def check_output(
    text: str, schema: Mapping[str, Any], *, max_depth: int = DEFAULT_MAX_DEPTH
) -> OutputCheck:
    """Parse ``text`` as JSON and validate it against ``schema``.

    A fenced code block around the JSON (```json ... ```) is tolerated: some
    models add one even when asked for JSON only. Never raises for bad input.
    """
    stripped = _unfenced(text)
    try:
        value = json.loads(stripped)
    except RecursionError:
        return OutputCheck(error=f"the answer is nested deeper than {max_depth} levels")
    except ValueError as exc:
        return OutputCheck(error=f"the answer is not JSON ({exc})")
    pointer = _depth_problem(value, max_depth)
    if pointer is not None:
        return OutputCheck(pointer=pointer, error=f"nested deeper than {max_depth} levels")
    validator = Draft202012Validator(schema, registry=_OFFLINE)
    try:
        error: ValidationError | None = best_match(validator.iter_errors(value))
    except RecursionError:
        return OutputCheck(error="the schema recurses without end on this answer")
    except Unresolvable as exc:  # a reference that is neither local nor fetched
        return OutputCheck(error=f"the schema refers to {exc.ref!r}, which is not in it")
    if error is not None:
        return OutputCheck(pointer=json_pointer(error.absolute_path), error=error.message[:500])
    return OutputCheck(value=value, valid=True)


def _unfenced(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        return stripped[stripped.index("\n") + 1 : -3].strip()
    return stripped


# OpenAI's strict subset ----------------------------------------------------------

_STRICT_KEYWORDS: Final = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "$ref", "$defs", "definitions", "description", "title", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minItems", "maxItems",
    }
)  # fmt: skip
_STRICT_MAX_DEPTH: Final = 10


def strict_subset_problem(schema: Mapping[str, Any]) -> str | None:
    """Why ``schema`` is outside OpenAI's strict structured-output subset, or ``None``.

    The subset: the root is an object (not ``anyOf``); every object lists all
    its properties in ``required`` and sets ``additionalProperties: false``;
    only the keywords of ``_STRICT_KEYWORDS``; at most 10 levels of objects.
    """
    if schema.get("type") != "object":
        return "the root is not an object schema"
    stack: list[tuple[Any, tuple[Any, ...], int]] = [(schema, (), 1)]
    while stack:
        current, path, depth = stack.pop()
        if not isinstance(current, Mapping):
            continue
        where = json_pointer(path) or "the root"
        unknown = sorted(set(current) - _STRICT_KEYWORDS)
        if unknown:
            return f"{where} uses {', '.join(unknown)}"
        properties = current.get("properties")
        if current.get("type") == "object" or isinstance(properties, Mapping):
            if depth > _STRICT_MAX_DEPTH:
                return f"{where} nests objects deeper than {_STRICT_MAX_DEPTH}"
            if current.get("additionalProperties") is not False:
                return f"{where} does not set additionalProperties: false"
            names = set(properties) if isinstance(properties, Mapping) else set()
            if set(current.get("required") or ()) != names:
                return f"{where} does not require every property"
        for key in ("properties", "$defs", "definitions"):
            children = current.get(key)
            if isinstance(children, Mapping):
                nested = depth + 1 if key == "properties" else depth
                stack.extend(
                    (child, (*path, key, name), nested) for name, child in children.items()
                )
        items = current.get("items")
        if isinstance(items, Mapping):
            stack.append((items, (*path, "items"), depth))
        for index, option in enumerate(current.get("anyOf") or ()):
            stack.append((option, (*path, "anyOf", index), depth))
    return None
