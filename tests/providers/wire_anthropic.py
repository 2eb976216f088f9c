"""A checker for Anthropic Messages request bodies, written from the HTTP 400 table.

``validate_anthropic_request(body)`` returns one readable line per broken rule
(an empty list means the body is fine). The rules are those of
the API's HTTP 400 messages plus the required request fields; each
line says which message/block it is about. Use it on every body a test builds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["validate_anthropic_request"]

ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
USER_BLOCKS = frozenset({"text", "tool_result", "image", "document"})
ASSISTANT_BLOCKS = frozenset(
    {
        "text",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "server_tool_use",
        "web_search_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
    }
)
SERVER_TOOL_TYPES = frozenset({"web_search_20250305", "code_execution_20250825"})
"""The versioned server tools (``tools`` entries with a ``type``, no ``input_schema``)."""
TOOL_CHOICE_TYPES = frozenset({"auto", "any", "tool", "none"})


def _blank(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _check_content(where: str, role: str, content: Any) -> list[str]:
    errors: list[str] = []
    if isinstance(content, str):
        if _blank(content):
            errors.append(f"{where}: empty or whitespace-only string content")
        return errors
    if not isinstance(content, list) or not content:
        return [f"{where}: content must be a non-empty string or list of blocks"]
    allowed = USER_BLOCKS if role == "user" else ASSISTANT_BLOCKS
    seen_other = False
    for position, block in enumerate(content):
        at = f"{where}.content.{position}"
        if not isinstance(block, Mapping):
            errors.append(f"{at}: block is not an object")
            continue
        kind = block.get("type")
        if kind not in allowed:
            errors.append(f"{at}: block type {kind!r} not allowed in a {role} message")
            continue
        if kind == "tool_result" and seen_other:
            errors.append(f"{at}: tool_result after other content (results must come first)")
        if kind != "tool_result":
            seen_other = True
        match kind:
            case "text":
                if _blank(block.get("text")):
                    errors.append(f"{at}: empty or whitespace-only text block")
            case "tool_use":
                if not isinstance(block.get("id"), str) or not ID_PATTERN.match(block["id"]):
                    errors.append(
                        f"{at}: tool_use.id {block.get('id')!r} must match {ID_PATTERN.pattern}"
                    )
                if _blank(block.get("name")):
                    errors.append(f"{at}: tool_use.name missing")
                if not isinstance(block.get("input"), Mapping):
                    errors.append(
                        f"{at}: tool_use.input must be an object, got {block.get('input')!r}"
                    )
            case "tool_result":
                if not isinstance(block.get("tool_use_id"), str) or not ID_PATTERN.match(
                    block["tool_use_id"]
                ):
                    errors.append(
                        f"{at}: tool_result.tool_use_id {block.get('tool_use_id')!r} invalid"
                    )
                if "content" in block:
                    inner = block["content"]
                    if isinstance(inner, str) and _blank(inner):
                        errors.append(f"{at}: empty tool_result content (omit it instead)")
                    elif isinstance(inner, list) and not inner:
                        errors.append(f"{at}: empty tool_result content list")
                if "is_error" in block and not isinstance(block["is_error"], bool):
                    errors.append(f"{at}: is_error must be a boolean")
            case "server_tool_use":
                if _blank(block.get("id")) or _blank(block.get("name")):
                    errors.append(f"{at}: server_tool_use needs its id and name")
            case kind if kind.endswith("_tool_result"):
                if _blank(block.get("tool_use_id")) or "content" not in block:
                    errors.append(f"{at}: {kind} needs tool_use_id and content")
            case "thinking":
                if not isinstance(block.get("thinking"), str) or _blank(block.get("signature")):
                    errors.append(f"{at}: thinking block needs thinking and signature")
            case "redacted_thinking":
                if _blank(block.get("data")):
                    errors.append(f"{at}: redacted_thinking block needs data")
    return errors


def _check_pairing(messages: list[Any]) -> list[str]:
    errors: list[str] = []
    all_ids: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        blocks = [b for b in _blocks(message.get("content")) if isinstance(b, Mapping)]
        if message.get("role") == "assistant":
            ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            for call_id in ids:
                if call_id in all_ids:
                    errors.append(f"messages.{index}: tool_use id {call_id!r} used twice")
                all_ids.add(call_id)
            if not ids:
                continue
            following = messages[index + 1] if index + 1 < len(messages) else None
            if not isinstance(following, Mapping) or following.get("role") != "user":
                errors.append(
                    f"messages.{index}: tool_use ids {ids} were found without tool_result "
                    "blocks immediately after"
                )
                continue
            answered = [
                b.get("tool_use_id")
                for b in _blocks(following.get("content"))
                if isinstance(b, Mapping) and b.get("type") == "tool_result"
            ]
            missing = [call_id for call_id in ids if call_id not in answered]
            if missing:
                errors.append(
                    f"messages.{index}: tool_use ids {missing} were found without tool_result "
                    "blocks immediately after"
                )
        elif message.get("role") == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            if not results:
                continue
            previous = messages[index - 1] if index > 0 else None
            offered = (
                [
                    b.get("id")
                    for b in _blocks(previous.get("content"))
                    if isinstance(b, Mapping) and b.get("type") == "tool_use"
                ]
                if isinstance(previous, Mapping) and previous.get("role") == "assistant"
                else []
            )
            for call_id in results:
                if call_id not in offered:
                    errors.append(
                        f"messages.{index}: unexpected tool_use_id {call_id!r} found in "
                        "tool_result blocks (no tool_use in the previous message)"
                    )
            if len(set(results)) != len(results):
                errors.append(f"messages.{index}: a tool_use is answered twice")
    return errors


def _check_tools(body: Mapping[str, Any]) -> list[str]:
    errors: list[str] = []
    tools = body.get("tools")
    names: set[str] = set()
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            errors.append("tools: must be a non-empty list when present")
            tools = []
        for position, tool in enumerate(tools):
            at = f"tools.{position}"
            if not isinstance(tool, Mapping):
                errors.append(f"{at}: not an object")
                continue
            name = tool.get("name")
            if "type" in tool:
                if tool["type"] not in SERVER_TOOL_TYPES or "input_schema" in tool:
                    errors.append(f"{at}: unknown server tool {tool['type']!r}")
                continue
            if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
                errors.append(f"{at}.name: {name!r} must match {TOOL_NAME_PATTERN.pattern}")
            else:
                names.add(name)
            schema = tool.get("input_schema")
            if not isinstance(schema, Mapping) or schema.get("type") != "object":
                errors.append(f"{at}.input_schema: must be an object schema of type 'object'")
    choice = body.get("tool_choice")
    if choice is not None:
        if tools is None:
            errors.append("tool_choice: present without tools")
        if not isinstance(choice, Mapping) or choice.get("type") not in TOOL_CHOICE_TYPES:
            errors.append(f"tool_choice: invalid {choice!r}")
        elif choice["type"] == "tool" and choice.get("name") not in names:
            errors.append(f"tool_choice: names an unknown tool {choice.get('name')!r}")
        elif choice["type"] == "none" and "disable_parallel_tool_use" in choice:
            errors.append("tool_choice: disable_parallel_tool_use is not allowed with none")
    return errors


def validate_anthropic_request(body: Mapping[str, Any]) -> list[str]:
    """Every rule of the Anthropic 400 table that ``body`` breaks; ``[]`` when none."""
    errors: list[str] = []
    if _blank(body.get("model")):
        errors.append("model: required")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        errors.append(f"max_tokens: required positive integer, got {max_tokens!r}")
    if "system" in body:
        system = body["system"]
        if isinstance(system, str):
            if _blank(system):
                errors.append("system: empty")
        elif not isinstance(system, list) or not system:
            errors.append("system: must be text or a non-empty list of text blocks")
    temperature = body.get("temperature")
    if temperature is not None and not (
        isinstance(temperature, int | float) and 0 <= temperature <= 1
    ):
        errors.append(f"temperature: must be in [0, 1], got {temperature!r}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*errors, "messages: required non-empty list"]
    previous_role = None
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, Mapping):
            errors.append(f"{where}: not an object")
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            errors.append(f"{where}: role {role!r} (only user and assistant)")
            continue
        if role == previous_role:
            errors.append(f"{where}: two {role} messages in a row (roles must alternate)")
        previous_role = role
        errors.extend(_check_content(where, role, message.get("content")))
    last = messages[-1]
    if isinstance(last, Mapping) and last.get("role") == "assistant":
        blocks = _blocks(last.get("content"))
        tail = blocks[-1] if blocks else None
        if isinstance(tail, Mapping) and tail.get("type") == "text":
            text = tail.get("text")
            if isinstance(text, str) and text != text.rstrip():
                errors.append(
                    f"messages.{len(messages) - 1}: final assistant content ends with whitespace"
                )
    errors.extend(_check_pairing(messages))
    errors.extend(_check_tools(body))
    return errors
