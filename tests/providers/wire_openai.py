"""A validator for OpenAI Chat Completions request bodies, written from the 400 rules.

Each rule says where it comes from: an HTTP 400 message of the API, the
request schema, or an error the API is known to return.
``validate_openai_request(body)`` returns the problems found; an empty list
means OpenAI would accept the body as far as we know.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["validate_openai_request"]

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
MAX_CALL_ID_LENGTH = 40  # "string too long ... maximum length 40" (pydantic-ai#4389)
MAX_TOOLS = 128
TOOL_CHOICE_KEYWORDS = ("none", "auto", "required")

# The request schema's properties per role; OpenAI refuses the others
# ("Additional properties are not allowed"), Groq says so loudest.
ALLOWED_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "refusal", "audio", "tool_calls", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}
CALL_KEYS = {"id", "type", "function"}
FUNCTION_KEYS = {"name", "arguments"}


def validate_openai_request(body: Any, mistral: bool = False) -> list[str]:
    """Problems that would make OpenAI (or, with ``mistral``, Mistral) answer 400."""
    if not isinstance(body, Mapping):
        return ["the body is not an object"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: a non-empty string is required")
    problems += _tools_problems(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages: a non-empty array is required")
        return problems
    problems += _messages_problems(messages, mistral=mistral)
    return problems


def _tools_problems(body: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    tools = body.get("tools")
    names: set[str] = set()
    if "tools" in body:
        # "[] is too short - 'tools'"
        if not isinstance(tools, list) or not tools:
            problems.append("tools: must be a non-empty array (omit the key instead of [])")
            tools = []
        if len(tools) > MAX_TOOLS:
            problems.append(f"tools: more than {MAX_TOOLS} tools")
        for index, tool in enumerate(tools):
            where = f"tools[{index}]"
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if not isinstance(tool, Mapping) or tool.get("type") != "function":
                problems.append(f'{where}: must be an object with type "function"')
            if not isinstance(function, Mapping):
                problems.append(f"{where}.function: an object is required")
                continue
            name = function.get("name")
            if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
                problems.append(f"{where}.function.name: must match {TOOL_NAME.pattern}")
            elif name in names:
                problems.append(f"{where}.function.name: {name!r} declared twice")
            else:
                names.add(name)
            if "parameters" in function and not isinstance(function["parameters"], Mapping):
                problems.append(f"{where}.function.parameters: must be a JSON Schema object")
            if "description" in function and not isinstance(function["description"], str):
                problems.append(f"{where}.function.description: must be a string")
    # "'parallel_tool_calls' is only allowed when 'tools' are specified"
    for key in ("tool_choice", "parallel_tool_calls"):
        if key in body and not tools:
            problems.append(f"{key}: only allowed when tools are specified")
    if "parallel_tool_calls" in body and not isinstance(body["parallel_tool_calls"], bool):
        problems.append("parallel_tool_calls: must be a boolean")
    if "tool_choice" in body:
        problems += _tool_choice_problems(body["tool_choice"], names)
    return problems


def _tool_choice_problems(choice: Any, names: set[str]) -> list[str]:
    if isinstance(choice, str):
        if choice not in TOOL_CHOICE_KEYWORDS:
            return [f"tool_choice: {choice!r} is not one of {TOOL_CHOICE_KEYWORDS}"]
        return []
    function = choice.get("function") if isinstance(choice, Mapping) else None
    if (
        not isinstance(choice, Mapping)
        or choice.get("type") != "function"
        or not isinstance(function, Mapping)
    ):
        return ['tool_choice: a keyword or {"type": "function", "function": {"name": ...}}']
    if function.get("name") not in names:
        return [f"tool_choice: names {function.get('name')!r}, which is not a declared tool"]
    return []


def _text_content_problems(content: Any, where: str) -> list[str]:
    if isinstance(content, str):
        return []
    if isinstance(content, list):
        if not content:  # minItems: 1
            return [f"{where}.content: an array of parts needs at least one part"]
        return []
    return [f"{where}.content: must be a string or an array of parts"]


def _messages_problems(messages: list[Any], *, mistral: bool) -> list[str]:
    problems: list[str] = []
    pending: list[str] = []  # calls of the last assistant turn not yet answered
    turn_calls: set[str] = set()  # every call of that turn (answered or not)
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: must be an object")
            continue
        role = message.get("role")
        if role not in ALLOWED_KEYS:
            problems.append(f"{where}.role: {role!r} is not a valid role")
            continue
        extra = set(message) - ALLOWED_KEYS[role]
        if extra:
            problems.append(f"{where}: unexpected keys {sorted(extra)}")
        if role != "tool":
            # "An assistant message with 'tool_calls' must be followed by tool
            # messages responding to each 'tool_call_id'."
            if pending:
                problems.append(f"{where}: calls {pending} were not answered before this message")
            pending, turn_calls = [], set()
        match role:
            case "system" | "developer" | "user":
                if "content" not in message:
                    problems.append(f"{where}.content: required")
                else:
                    problems += _text_content_problems(message["content"], where)
            case "assistant":
                call_ids, call_problems = _assistant_problems(message, where, mistral=mistral)
                problems += call_problems
                pending, turn_calls = list(call_ids), set(call_ids)
            case "tool":
                problems += _tool_message_problems(message, where, pending, turn_calls, mistral)
    if pending:
        problems.append(f"messages: calls {pending} were never answered")
    return problems


def _assistant_problems(
    message: Mapping[str, Any], where: str, *, mistral: bool
) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    ids: list[str] = []
    content = message.get("content")
    if "tool_calls" not in message:
        # "Required unless tool_calls or function_call is specified."
        if content is None and "function_call" not in message:
            problems.append(f"{where}.content: required when there are no tool_calls")
        elif content is not None:
            problems += _text_content_problems(content, where)
        return ids, problems
    if content is not None:
        problems += _text_content_problems(content, where)
    calls = message["tool_calls"]
    # "Invalid 'messages[1].tool_calls': empty array."
    if not isinstance(calls, list) or not calls:
        problems.append(f"{where}.tool_calls: must be a non-empty array (omit the key instead)")
        return ids, problems
    for position, call in enumerate(calls):
        at = f"{where}.tool_calls[{position}]"
        if not isinstance(call, Mapping):
            problems.append(f"{at}: must be an object")
            continue
        if set(call) - CALL_KEYS:
            problems.append(f"{at}: unexpected keys {sorted(set(call) - CALL_KEYS)}")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            problems.append(f"{at}.id: a non-empty string is required")
        else:
            problems += _id_problems(call_id, f"{at}.id", mistral)
            if call_id in ids:
                problems.append(f"{at}.id: {call_id!r} appears twice in one turn")
            ids.append(call_id)
        if call.get("type") != "function":
            problems.append(f'{at}.type: must be "function"')
        function = call.get("function")
        if not isinstance(function, Mapping):
            problems.append(f"{at}.function: an object is required")
            continue
        if set(function) - FUNCTION_KEYS:
            problems.append(
                f"{at}.function: unexpected keys {sorted(set(function) - FUNCTION_KEYS)}"
            )
        name = function.get("name")
        # "Invalid 'messages[69].tool_calls[0].function.name': empty string"
        if not isinstance(name, str) or not name:
            problems.append(f"{at}.function.name: a non-empty string is required")
        # "expected a string, but got an object instead"
        if not isinstance(function.get("arguments"), str):
            problems.append(f"{at}.function.arguments: must be a JSON string")
    return ids, problems


def _tool_message_problems(
    message: Mapping[str, Any],
    where: str,
    pending: list[str],
    turn_calls: set[str],
    mistral: bool,
) -> list[str]:
    problems: list[str] = []
    if "content" not in message:
        problems.append(f"{where}.content: required")
    else:
        problems += _text_content_problems(message["content"], where)
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        problems.append(f"{where}.tool_call_id: a non-empty string is required")
        return problems
    problems += _id_problems(call_id, f"{where}.tool_call_id", mistral)
    # "Messages with role 'tool' must be a response to a preceding message
    # with 'tool_calls'."
    if call_id in pending:
        pending.remove(call_id)
    elif call_id in turn_calls:
        problems.append(f"{where}.tool_call_id: {call_id!r} is answered twice")
    else:
        problems.append(f"{where}.tool_call_id: {call_id!r} answers no call of the preceding turn")
    return problems


def _id_problems(call_id: str, where: str, mistral: bool) -> list[str]:
    if mistral:
        # "Tool call id was call_0fypS1hVX but must be a-z, A-Z, 0-9, with a length of 9."
        if not MISTRAL_ID.fullmatch(call_id):
            return [f"{where}: {call_id!r} is not 9 characters of [a-zA-Z0-9] (Mistral)"]
        return []
    if len(call_id) > MAX_CALL_ID_LENGTH:
        return [f"{where}: {call_id!r} is longer than {MAX_CALL_ID_LENGTH} characters"]
    return []
