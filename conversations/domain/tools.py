"""Tool specifications: what the model is told a tool is called and accepts."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conversations.exceptions import InvalidArgumentError

__all__ = ["TOOL_NAME_PATTERN", "ToolSpec"]

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Names OpenAI and Anthropic both accept (Gemini also needs a leading letter or ``_``)."""


def _empty_object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to a model: name, description and a JSON Schema object."""

    name: str
    """Matches ``^[a-zA-Z0-9_-]{1,64}$``."""
    description: str = ""
    """What the tool does, in words the model reads."""
    parameters: Mapping[str, Any] = field(default_factory=_empty_object_schema)
    """A JSON Schema of type ``object``; ``properties`` is always an object."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME_PATTERN.fullmatch(self.name):
            raise InvalidArgumentError(
                f"tool name {self.name!r} must match {TOOL_NAME_PATTERN.pattern}",
                code="invalid_tool_name",
                field="function/name",
            )
        if not isinstance(self.description, str):
            raise InvalidArgumentError(
                "tool description must be a string",
                code="invalid_tool_spec",
                field="function/description",
            )
        if not isinstance(self.parameters, Mapping):
            raise InvalidArgumentError(
                "tool parameters must be a JSON Schema object",
                code="invalid_tool_spec",
                field="function/parameters",
            )
        parameters = copy.deepcopy(dict(self.parameters))
        parameters.setdefault("type", "object")
        if parameters["type"] != "object":
            raise InvalidArgumentError(
                f'tool parameters must have type "object", got {parameters["type"]!r}',
                code="invalid_tool_spec",
                field="function/parameters/type",
            )
        properties = parameters.get("properties")
        if properties is None or properties == []:
            parameters["properties"] = {}
        elif not isinstance(properties, Mapping):
            raise InvalidArgumentError(
                "tool parameters' properties must be an object",
                code="invalid_tool_spec",
                field="function/parameters/properties",
            )
        object.__setattr__(self, "parameters", parameters)

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI ``tools[]`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(dict(self.parameters)),
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolSpec:
        """Build from the OpenAI ``tools[]`` entry."""
        function = data.get("function") if isinstance(data, Mapping) else None
        if not isinstance(function, Mapping):
            raise InvalidArgumentError(
                "a tool spec needs a 'function' object", code="invalid_tool_spec", field="function"
            )
        parameters = function.get("parameters")
        return cls(
            name=function.get("name"),  # type: ignore[arg-type]
            description=function.get("description") or "",
            parameters=_empty_object_schema() if parameters is None else parameters,
        )
