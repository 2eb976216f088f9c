"""Each vendor's native way of asking for JSON that satisfies a schema (pure wire mapping).

The adapters call these from their ``build_payload``; what a vendor cannot
enforce is still checked by the loop (``jsonschema``, one repair turn):

- OpenAI and compatibles: ``response_format`` ``json_schema`` (the Responses
  API: ``text.format``), ``strict`` only when the schema is inside OpenAI's
  strict subset (logged once per schema);
- Anthropic: ``output_config.format`` on the models that support structured
  output; otherwise a forced tool whose input is the answer, but only with
  extended thinking off and no other tool offered (a forced tool with
  thinking is refused by the API);
- Gemini: ``responseMimeType: application/json`` with ``responseSchema`` (the
  OpenAPI subset, through the tools' converter) or ``responseJsonSchema``
  when the subset cannot express it; nothing while tools are offered, as
  some models refuse both together;
- Ollama: ``format`` with the schema.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

from conversations.domain import CompletionResponse
from conversations.domain.output import OutputSpec, strict_subset_problem

from .gemini_schema import SchemaNotExpressible, gemini_parameters

__all__ = [
    "OUTPUT_TOOL_NAME",
    "anthropic_output",
    "anthropic_supports_native_output",
    "gemini_output",
    "ollama_format",
    "openai_response_format",
    "responses_text_format",
    "unwrap_output_tool",
]

logger = logging.getLogger("conversations.providers")

OUTPUT_TOOL_NAME: Final = "structured_output"
"""The forced tool's name when a vendor's only way to enforce a schema is a tool call."""

_ANTHROPIC_NATIVE: Final = re.compile(
    r"claude-(?:opus-4-[1-9]|sonnet-4-[5-9]|haiku-4-[5-9]|(?:opus|sonnet|haiku)-[5-9])"
)
_logged: set[tuple[str, bool]] = set()
_LOGGED_MAX: Final = 4096


def openai_response_format(spec: OutputSpec) -> dict[str, Any]:
    """Chat Completions' ``response_format``: strict when the schema is inside the strict subset."""
    return {
        "type": "json_schema",
        "json_schema": {"name": spec.name, "schema": dict(spec.schema), "strict": _strict(spec)},
    }


def responses_text_format(spec: OutputSpec) -> dict[str, Any]:
    """The Responses API's ``text.format``: the same decision, its flatter shape."""
    return {
        "type": "json_schema",
        "name": spec.name,
        "schema": dict(spec.schema),
        "strict": _strict(spec),
    }


def _strict(spec: OutputSpec) -> bool:
    """Whether OpenAI may enforce ``spec`` strictly; the decision is logged once per schema."""
    problem = strict_subset_problem(spec.schema)
    strict = problem is None
    key = (spec.sha256, strict)
    if key not in _logged:
        # Once per schema and process: every request of a run would say the same.
        if len(_logged) >= _LOGGED_MAX:
            _logged.clear()
        _logged.add(key)
        if strict:
            logger.info("output schema %s: strict json_schema", spec.sha256[:12])
        else:
            logger.info(
                "output schema %s: strict false (%s); validated locally", spec.sha256[:12], problem
            )
    return strict


def anthropic_supports_native_output(model: str) -> bool:
    """Whether the Claude model takes ``output_config.format`` (structured output)."""
    return bool(_ANTHROPIC_NATIVE.search(model))


def anthropic_output(
    spec: OutputSpec, *, model: str, thinking: bool, tools_offered: bool
) -> dict[str, Any]:
    """The keys to add to a Messages body for ``spec`` (empty: only local validation)."""
    if anthropic_supports_native_output(model):
        return {"output_config": {"format": {"type": "json_schema", "schema": dict(spec.schema)}}}
    if thinking or tools_offered:
        # A forced tool with extended thinking is a 400, and forcing it while
        # other tools are offered would keep the model from calling them.
        return {}
    return {
        "tools": [
            {
                "name": OUTPUT_TOOL_NAME,
                "description": "Give the final answer as this tool's input.",
                "input_schema": dict(spec.schema),
            }
        ],
        "tool_choice": {"type": "tool", "name": OUTPUT_TOOL_NAME},
    }


def gemini_output(spec: OutputSpec, *, tools_offered: bool) -> dict[str, Any]:
    """The ``generationConfig`` keys for ``spec`` (empty while tools are offered)."""
    if tools_offered:
        return {}
    config: dict[str, Any] = {"responseMimeType": "application/json"}
    try:
        converted = gemini_parameters(spec.schema)
    except SchemaNotExpressible:
        converted = None
    if converted is not None:
        config["responseSchema"] = converted
    else:
        config["responseJsonSchema"] = dict(spec.schema)
    return config


def ollama_format(spec: OutputSpec) -> dict[str, Any]:
    """Ollama's ``format``: the schema itself."""
    return dict(spec.schema)


def unwrap_output_tool(response: CompletionResponse) -> CompletionResponse:
    """An answer given as the forced output tool's call, as the text answer it stands for."""
    calls = response.tool_calls or ()
    if len(calls) != 1 or calls[0].name != OUTPUT_TOOL_NAME:
        return response
    arguments: Mapping[str, Any] = calls[0].arguments
    text = calls[0].raw_arguments or json.dumps(dict(arguments), ensure_ascii=False)
    return dataclasses.replace(response, content=text, tool_calls=None, finish_reason="stop")
