"""A validator of OpenAI's fine-tuning line formats, written from the format's documentation.

Chat lines (supervised fine-tuning): ``messages`` (roles system, developer,
user, assistant, tool), optional ``tools`` (functions with a JSON Schema
``parameters`` object) and ``parallel_tool_calls``. An assistant message has
text ``content`` or ``tool_calls`` (``id``, ``type: "function"``,
``function.name`` and ``function.arguments`` as JSON text of an object) and
may carry ``weight`` 0 or 1; each call is answered by a ``tool`` message
(``tool_call_id``) right after the message that made it; the example ends
with an assistant message. Preference lines (DPO): ``input`` (``messages``
ending with a user message, ``tools``, ``parallel_tool_calls``) and
``preferred_output`` / ``non_preferred_output``, each a list of one
assistant message with text.

Every check raises ``FormatError`` naming the place that breaks it.
"""

from __future__ import annotations

import json
from typing import Any


class FormatError(AssertionError):
    """A line that the fine-tuning format refuses."""


_ROLES = {"system", "developer", "user", "assistant", "tool"}
_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "tool_calls", "weight", "name", "refusal"},
    "tool": {"role", "content", "tool_call_id"},
}


def _fail(where: str, why: str) -> None:
    raise FormatError(f"{where}: {why}")


def _check_tools(tools: Any, where: str) -> set[str]:
    if not isinstance(tools, list):
        _fail(where, "tools must be a list")
    names = set()
    for index, tool in enumerate(tools):
        place = f"{where}/{index}"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            _fail(place, 'a tool is {"type": "function", "function": {...}}')
        function = tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            _fail(place, "a function needs a name")
        if not isinstance(function.get("parameters", {}), dict):
            _fail(place, "parameters must be a JSON Schema object")
        if not set(function) <= {"name", "description", "parameters", "strict"}:
            _fail(place, f"unknown keys {sorted(set(function) - {'name'})}")
        names.add(function["name"])
    return names


def _check_messages(messages: Any, where: str, *, tools: set[str] | None) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        _fail(where, "messages must be a non-empty list")
    waiting: list[str] = []  # the calls of the last assistant message not answered yet
    for index, message in enumerate(messages):
        place = f"{where}/{index}"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            _fail(place, f"role must be one of {sorted(_ROLES)}")
        role = message["role"]
        if not set(message) <= _KEYS[role]:
            _fail(place, f"unknown keys {sorted(set(message) - _KEYS[role])} for {role}")
        if waiting and role != "tool":
            _fail(place, f"calls {waiting} are not answered before a {role} message")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:
                _fail(place, f"tool_call_id {call_id!r} answers no open call")
            waiting.remove(call_id)
            if not isinstance(message.get("content"), str):
                _fail(place, "a tool result's content is text")
        elif role == "assistant":
            calls = message.get("tool_calls")
            content = message.get("content")
            if content is not None and not isinstance(content, str):
                _fail(place, "content must be text or null")
            if calls is None and not content:
                _fail(place, "an assistant message needs content or tool_calls")
            if "weight" in message and message["weight"] not in (0, 1):
                _fail(place, "weight must be 0 or 1")
            for number, call in enumerate(calls or ()):
                spot = f"{place}/tool_calls/{number}"
                if not isinstance(call, dict) or call.get("type") != "function":
                    _fail(spot, 'a call has type "function"')
                if not isinstance(call.get("id"), str) or not call["id"]:
                    _fail(spot, "a call has an id")
                function = call.get("function") or {}
                arguments = function.get("arguments")
                if not isinstance(arguments, str):
                    _fail(spot, "arguments must be JSON text, not a decoded value")
                try:
                    decoded = json.loads(arguments)
                except ValueError:
                    _fail(spot, "arguments are not valid JSON")
                if not isinstance(decoded, dict):
                    _fail(spot, "arguments must encode an object")
                if tools is not None and function.get("name") not in tools:
                    _fail(spot, f"{function.get('name')!r} is not among the tools")
                waiting.append(call["id"])
        elif not isinstance(message.get("content"), str):
            _fail(place, f"a {role} message's content is text")
    if waiting:
        _fail(where, f"calls {waiting} are never answered")
    return messages


def check_chat_line(line: Any) -> None:
    """One line of a chat fine-tuning file."""
    if not isinstance(line, dict) or not set(line) <= {"messages", "tools", "parallel_tool_calls"}:
        _fail("", "a line has messages, and optionally tools and parallel_tool_calls")
    tools = _check_tools(line["tools"], "tools") if "tools" in line else set()
    if not isinstance(line.get("parallel_tool_calls", True), bool):
        _fail("parallel_tool_calls", "must be a boolean")
    messages = _check_messages(line.get("messages"), "messages", tools=tools)
    if messages[-1]["role"] != "assistant":
        _fail("messages", "the example ends with an assistant message")
    if not any(m["role"] == "assistant" and m.get("weight", 1) == 1 for m in messages):
        _fail("messages", "nothing to learn: every assistant message has weight 0")


def check_preference_line(line: Any) -> None:
    """One line of a preference (DPO) fine-tuning file."""
    if not isinstance(line, dict) or set(line) != {
        "input",
        "preferred_output",
        "non_preferred_output",
    }:
        _fail("", "a line has input, preferred_output and non_preferred_output")
    given = line["input"]
    if not isinstance(given, dict) or not set(given) <= {
        "messages",
        "tools",
        "parallel_tool_calls",
    }:
        _fail("input", "input has messages, and optionally tools and parallel_tool_calls")
    tools = _check_tools(given.get("tools", []), "input/tools")
    messages = _check_messages(given.get("messages"), "input/messages", tools=tools)
    if messages[-1]["role"] != "user":
        _fail("input/messages", "the prompt ends with a user message")
    for key in ("preferred_output", "non_preferred_output"):
        output = line[key]
        if (
            not isinstance(output, list)
            or len(output) != 1
            or output[0].get("role") != "assistant"
            or not isinstance(output[0].get("content"), str)
            or not output[0]["content"]
            or set(output[0]) != {"role", "content"}
        ):
            _fail(key, "one assistant message with text")
