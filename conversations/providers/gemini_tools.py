"""How Gemini is told about tools: names it accepts, ``functionDeclarations`` and ``toolConfig``.

Also what a response's calls keep for their replay (:func:`native_call_metadata`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any, Final

from conversations.domain import ChatMessage, InvalidArgumentError, ToolCall, ToolSpec

from .base import CompletionOptions, stable_alias
from .conversion import require_offered_tool
from .gemini_schema import SchemaNotExpressible, gemini_parameters

__all__ = [
    "check_function_names",
    "gemini_function_declarations",
    "gemini_function_name",
    "gemini_tool_config",
    "native_call_metadata",
]

_FUNCTION_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")


def gemini_function_name(name: str) -> str:
    """The name a tool goes by on Gemini's wire; stable, so every request agrees.

    Gemini refuses a function name that does not start with a letter or ``_``
    ("Invalid function name"), though tool names may start with a digit or
    ``-``. Such a name is sent as ``_`` plus :func:`stable_alias` of it (its
    text and a hash of it); every other name is sent as it is.
    """
    if _FUNCTION_NAME.fullmatch(name):
        return name
    return "_" + stable_alias(name, pattern=_FUNCTION_NAME)


def check_function_names(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> None:
    """Two tool names must never share a wire name, or calls would reach the wrong tool."""
    names = [spec.name for spec in tools]
    names += [call.name for m in messages for call in m.tool_calls or ()]
    originals: dict[str, str] = {}
    for name in names:
        alias = gemini_function_name(name)
        if originals.setdefault(alias, name) != name:
            raise InvalidArgumentError(
                f"tool names {originals[alias]!r} and {name!r} map to the same Gemini "
                f"function name {alias!r}",
                code="tool_name_collision",
                field="tools",
            )


def gemini_function_declarations(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """One ``functionDeclarations`` entry per tool.

    A schema the OpenAPI subset cannot express (recursive ``$ref``) is sent
    whole as ``parametersJsonSchema``, Gemini's full-JSON-Schema alternative.
    """
    declarations: list[dict[str, Any]] = []
    for spec in tools:
        entry: dict[str, Any] = {"name": gemini_function_name(spec.name)}
        if spec.description:
            entry["description"] = spec.description
        try:
            parameters = gemini_parameters(spec.parameters)
        except SchemaNotExpressible:
            entry["parametersJsonSchema"] = copy.deepcopy(dict(spec.parameters))
        else:
            if parameters is not None:
                entry["parameters"] = parameters
        declarations.append(entry)
    return declarations


def gemini_tool_config(
    options: CompletionOptions, tools: Sequence[ToolSpec]
) -> dict[str, Any] | None:
    """``toolConfig``, or ``None`` to leave Gemini's default (AUTO).

    Gemini has no switch for parallel calls; ``parallel_tool_calls`` is ignored.
    """
    config: dict[str, Any]
    match options.tool_choice:
        case None:
            return None
        case "auto":
            config = {"mode": "AUTO"}
        case "none":
            config = {"mode": "NONE"}
        case "required":
            config = {"mode": "ANY"}
        case name:
            require_offered_tool(name, tools)
            config = {"mode": "ANY", "allowedFunctionNames": [gemini_function_name(name)]}
    return {"functionCallingConfig": config}


def native_call_metadata(
    calls: Sequence[ToolCall] | None,
    candidates: Sequence[tuple[str | None, str, Any]],
    signatures: Sequence[str | None],
) -> dict[str, dict[str, str]]:
    """``{our_call_id: {"id"?, "thought_signature"?}}`` for the calls Gemini marked."""
    # assign_call_ids drops exactly the nameless candidates, in order.
    kept = [
        (native_id, signature)
        for (native_id, name, _), signature in zip(candidates, signatures, strict=True)
        if name
    ]
    native: dict[str, dict[str, str]] = {}
    for call, (native_id, signature) in zip(calls or (), kept, strict=True):
        entry: dict[str, str] = {}
        if native_id is not None:
            entry["id"] = native_id
        if signature is not None:
            entry["thought_signature"] = signature
        if entry:
            native[call.id] = entry
    return native
