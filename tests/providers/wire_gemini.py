"""A checker for Gemini generateContent request bodies, written from the HTTP 400 table.

``validate_gemini_request(body)`` returns one readable line per broken rule (an
empty list means the body is fine). The rules are the API's HTTP 400 causes
plus the request shape of generateContent, and two schema rules known
from API errors (string ``format`` only ``enum``/``date-time``; ``required``
names must be properties). Use it on every body a test builds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["validate_gemini_request"]

FUNCTION_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
# The fields of Gemini's Schema (an OpenAPI 3.0 subset); anything else is
# "Unknown name ... Cannot find field".
SCHEMA_FIELDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "anyOf",
        "propertyOrdering",
        "default",
        "example",
    }
)
SCHEMA_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object"})
STRING_FORMATS = frozenset({"enum", "date-time"})
MODES = frozenset({"AUTO", "ANY", "NONE", "VALIDATED"})
PART_DATA = (
    "text",
    "functionCall",
    "functionResponse",
    "inlineData",
    "fileData",
    "executableCode",
    "codeExecutionResult",
)
BUILT_IN_TOOLS = frozenset({"google_search", "code_execution"})
"""Gemini's own tools: a ``tools`` entry that is ``{name: {}}``."""


def _check_schema(where: str, schema: Any) -> list[str]:
    if not isinstance(schema, Mapping):
        return [f"{where}: schema is not an object"]
    errors = [
        f"{where}: unknown schema keyword {key!r}" for key in schema if key not in SCHEMA_FIELDS
    ]
    kind = schema.get("type")
    if kind is not None and (not isinstance(kind, str) or kind.lower() not in SCHEMA_TYPES):
        errors.append(f"{where}.type: {kind!r} is not a Gemini type")
    kind = kind.lower() if isinstance(kind, str) else None
    properties = schema.get("properties")
    if "properties" in schema:
        if not isinstance(properties, Mapping) or not properties:
            errors.append(f"{where}.properties: should be non-empty for OBJECT type")
        else:
            for name, sub in properties.items():
                errors.extend(_check_schema(f"{where}.properties.{name}", sub))
    required = schema.get("required")
    if required is not None:
        known = properties if isinstance(properties, Mapping) else {}
        if not isinstance(required, list):
            errors.append(f"{where}.required: not a list")
        else:
            errors.extend(
                f"{where}.required: {name!r} is not a property"
                for name in required
                if name not in known
            )
    if kind == "array" and "items" not in schema:
        errors.append(f"{where}.items: missing field (arrays need items)")
    if "items" in schema:
        errors.extend(_check_schema(f"{where}.items", schema["items"]))
    for position, sub in enumerate(schema.get("anyOf") or []):
        errors.extend(_check_schema(f"{where}.anyOf.{position}", sub))
    enum = schema.get("enum")
    if enum is not None and (
        not isinstance(enum, list) or not all(isinstance(v, str) for v in enum)
    ):
        errors.append(f"{where}.enum: values must be strings")
    fmt = schema.get("format")
    if fmt is not None and kind == "string" and fmt not in STRING_FORMATS:
        errors.append(f"{where}.format: only 'enum' and 'date-time' are supported for STRING")
    return errors


def _check_tools(body: Mapping[str, Any]) -> tuple[list[str], set[str]]:
    errors: list[str] = []
    names: set[str] = set()
    tools = body.get("tools")
    if tools is None:
        return errors, names
    if not isinstance(tools, list) or not tools:
        return ["tools: must be a non-empty list when present"], names
    for t_index, tool in enumerate(tools):
        if isinstance(tool, Mapping) and len(tool) == 1 and set(tool) <= BUILT_IN_TOOLS:
            continue
        declarations = tool.get("functionDeclarations") if isinstance(tool, Mapping) else None
        if not isinstance(declarations, list) or not declarations:
            errors.append(f"tools.{t_index}: functionDeclarations must be a non-empty list")
            continue
        for d_index, declaration in enumerate(declarations):
            at = f"tools.{t_index}.functionDeclarations.{d_index}"
            if not isinstance(declaration, Mapping):
                errors.append(f"{at}: not an object")
                continue
            name = declaration.get("name")
            if not isinstance(name, str) or not FUNCTION_NAME_PATTERN.match(name):
                errors.append(f"{at}.name: {name!r} is not a valid function name")
            else:
                names.add(name)
            if "parameters" in declaration and "parametersJsonSchema" in declaration:
                errors.append(f"{at}: parameters and parametersJsonSchema are mutually exclusive")
            if "parameters" in declaration:
                parameters = declaration["parameters"]
                errors.extend(_check_schema(f"{at}.parameters", parameters))
                if isinstance(parameters, Mapping) and "properties" not in parameters:
                    errors.append(
                        f"{at}.parameters: an object without properties (omit parameters)"
                    )
            if "parametersJsonSchema" in declaration and not isinstance(
                declaration["parametersJsonSchema"], Mapping
            ):
                errors.append(f"{at}.parametersJsonSchema: not an object")
    return errors, names


def _check_tool_config(body: Mapping[str, Any], names: set[str]) -> list[str]:
    config = body.get("toolConfig")
    if config is None:
        return []
    errors: list[str] = []
    if "tools" not in body:
        errors.append("toolConfig: present without tools")
    calling = config.get("functionCallingConfig") if isinstance(config, Mapping) else None
    if not isinstance(calling, Mapping) or calling.get("mode") not in MODES:
        return [*errors, f"toolConfig.functionCallingConfig: invalid {calling!r}"]
    allowed = calling.get("allowedFunctionNames")
    if allowed is not None:
        if calling.get("mode") not in ("ANY", "VALIDATED"):
            errors.append("toolConfig: allowedFunctionNames needs mode ANY")
        errors.extend(
            f"toolConfig: unknown function {name!r}" for name in allowed if name not in names
        )
    return errors


def _check_part(where: str, role: str, part: Any) -> list[str]:
    if not isinstance(part, Mapping):
        return [f"{where}: part is not an object"]
    data = [key for key in PART_DATA if key in part]
    if len(data) != 1:
        return [f"{where}: a part needs exactly one of {PART_DATA}, got {data}"]
    errors: list[str] = []
    match data[0]:
        case "text":
            if not isinstance(part["text"], str) or not part["text"].strip():
                errors.append(f"{where}.text: empty")
        case "functionCall":
            call = part["functionCall"]
            if role != "model":
                errors.append(f"{where}: functionCall in a {role} content")
            if (
                not isinstance(call, Mapping)
                or not isinstance(call.get("name"), str)
                or not call["name"]
            ):
                errors.append(f"{where}.functionCall: name required")
            elif not FUNCTION_NAME_PATTERN.match(call["name"]):
                errors.append(f"{where}.functionCall.name: {call['name']!r} is invalid")
            elif "args" in call and not isinstance(call["args"], Mapping):
                errors.append(f"{where}.functionCall.args: must be an object, got {call['args']!r}")
        case "functionResponse":
            response = part["functionResponse"]
            if role != "user":
                errors.append(f"{where}: functionResponse in a {role} content")
            if (
                not isinstance(response, Mapping)
                or not isinstance(response.get("name"), str)
                or not response["name"]
            ):
                errors.append(f"{where}.functionResponse: name required")
            elif not FUNCTION_NAME_PATTERN.match(response["name"]):
                errors.append(f"{where}.functionResponse.name: {response['name']!r} is invalid")
            elif not isinstance(response.get("response"), Mapping):
                errors.append(f"{where}.functionResponse.response: must be an object")
    if "thoughtSignature" in part and not isinstance(part["thoughtSignature"], str):
        errors.append(f"{where}.thoughtSignature: not a string")
    return errors


def _kinds(content: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    parts = content.get("parts")
    if not isinstance(parts, list):
        return []
    return [p[key] for p in parts if isinstance(p, Mapping) and isinstance(p.get(key), Mapping)]


def _check_turns(contents: list[Any]) -> list[str]:
    errors: list[str] = []
    for index, content in enumerate(contents):
        if not isinstance(content, Mapping):
            continue
        calls = _kinds(content, "functionCall")
        responses = _kinds(content, "functionResponse")
        previous = (
            contents[index - 1] if index > 0 and isinstance(contents[index - 1], Mapping) else None
        )
        following = (
            contents[index + 1]
            if index + 1 < len(contents) and isinstance(contents[index + 1], Mapping)
            else None
        )
        if calls:
            if previous is None or previous.get("role") != "user":
                errors.append(
                    f"contents.{index}: function call turn must come immediately after a user "
                    "turn or after a function response turn"
                )
            answers = _kinds(following, "functionResponse") if following is not None else []
            if following is None or following.get("role") != "user" or not answers:
                errors.append(
                    f"contents.{index}: function response turn must come immediately after "
                    "this function call turn"
                )
            elif len(answers) != len(calls):
                errors.append(
                    f"contents.{index + 1}: {len(answers)} function response parts for "
                    f"{len(calls)} function call parts"
                )
            else:
                for position, (call, answer) in enumerate(zip(calls, answers, strict=True)):
                    if call.get("name") != answer.get("name"):
                        errors.append(
                            f"contents.{index + 1}.parts.{position}: response name "
                            f"{answer.get('name')!r} does not match call {call.get('name')!r}"
                        )
                    if "id" in call and call["id"] != answer.get("id"):
                        errors.append(
                            f"contents.{index + 1}.parts.{position}: response id "
                            f"{answer.get('id')!r} does not match call id {call['id']!r}"
                        )
        if responses and (previous is None or not _kinds(previous, "functionCall")):
            errors.append(
                f"contents.{index}: function response turn does not follow a function call turn"
            )
    return errors


def validate_gemini_request(body: Mapping[str, Any]) -> list[str]:
    """Every rule of the Gemini 400 table that ``body`` breaks; ``[]`` when none."""
    errors: list[str] = []
    if "systemInstruction" in body:
        system = body["systemInstruction"]
        parts = system.get("parts") if isinstance(system, Mapping) else None
        if not isinstance(parts, list) or not parts:
            errors.append("systemInstruction: needs parts")
        else:
            for position, part in enumerate(parts):
                if (
                    not isinstance(part, Mapping)
                    or not isinstance(part.get("text"), str)
                    or not part["text"].strip()
                ):
                    errors.append(f"systemInstruction.parts.{position}: empty text")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        errors.append("contents: required non-empty list")
        contents = []
    for index, content in enumerate(contents):
        where = f"contents.{index}"
        if not isinstance(content, Mapping):
            errors.append(f"{where}: not an object")
            continue
        role = content.get("role")
        if role not in ("user", "model"):
            errors.append(f"{where}.role: {role!r} (only user and model)")
            continue
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            errors.append(f"{where}.parts: required non-empty list")
            continue
        for position, part in enumerate(parts):
            errors.extend(_check_part(f"{where}.parts.{position}", role, part))
    errors.extend(_check_turns(contents))
    tool_errors, names = _check_tools(body)
    errors.extend(tool_errors)
    errors.extend(_check_tool_config(body, names))
    return errors
