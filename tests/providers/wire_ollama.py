"""A validator for Ollama ``/api/chat`` request bodies, written from the API's documented rules.

Ollama answers few requests with a 400; most mistakes (string arguments,
``stream`` left at its default, sampling keys at the top level, a result
without its tool's name) decode badly or are silently ignored instead. So the
validator checks what the server's request types expect.
``validate_ollama_request(body)`` returns the problems found; empty = valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["validate_ollama_request"]

ROLES = ("system", "user", "assistant", "tool")
# Not fields of ChatRequest: Go's decoder drops them without a word.
UNSUPPORTED_KEYS = ("tool_choice", "parallel_tool_calls")
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "num_predict", "stop", "seed")


def validate_ollama_request(body: Any) -> list[str]:
    """Problems in an Ollama ``/api/chat`` body (non-streamed, with tools)."""
    if not isinstance(body, Mapping):
        return ["the body is not an object"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: a non-empty string is required")
    # stream defaults to true: without an explicit false the answer is NDJSON.
    if body.get("stream") is not False:
        problems.append("stream: must be false (the default is true)")
    for key in UNSUPPORTED_KEYS:
        if key in body:
            problems.append(f"{key}: Ollama has no such field")
    for key in SAMPLING_KEYS:
        if key in body:
            problems.append(f"{key}: sampling settings belong under options")
    if "options" in body and not isinstance(body["options"], Mapping):
        problems.append("options: must be an object")
    problems += _tools_problems(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages: a non-empty array is required")
        return problems
    problems += _messages_problems(messages)
    return problems


def _tools_problems(body: Mapping[str, Any]) -> list[str]:
    if "tools" not in body:
        return []
    tools = body["tools"]
    if not isinstance(tools, list) or not tools:
        return ["tools: must be a non-empty array (omit the key instead of [])"]
    problems: list[str] = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            problems.append(f'tools[{index}]: must be an object with type "function"')
        if not isinstance(function, Mapping) or not function.get("name"):
            problems.append(f"tools[{index}].function.name: required")
        elif "parameters" in function and not isinstance(function["parameters"], Mapping):
            problems.append(f"tools[{index}].function.parameters: must be an object")
    return problems


def _messages_problems(messages: list[Any]) -> list[str]:
    problems: list[str] = []
    pending: dict[str, str] = {}  # unanswered calls of the last assistant turn: id -> name
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: must be an object")
            continue
        role = message.get("role")
        if role not in ROLES:
            problems.append(f"{where}.role: {role!r} is not one of {ROLES}")
            continue
        # content is a Go string: text only, no part arrays.
        if not isinstance(message.get("content"), str):
            problems.append(f"{where}.content: must be a string")
        if role != "tool":
            if pending:
                problems.append(
                    f"{where}: calls {sorted(pending)} were not answered before this message"
                )
            pending = {}
        if role == "assistant" and "tool_calls" in message:
            calls, call_problems = _calls(message["tool_calls"], where)
            problems += call_problems
            pending = calls
        elif "tool_calls" in message:
            problems.append(f"{where}.tool_calls: only assistant messages carry calls")
        if role == "tool":
            problems += _result_problems(message, where, pending)
    if pending:
        problems.append(f"messages: calls {sorted(pending)} were never answered")
    return problems


def _calls(raw_calls: Any, where: str) -> tuple[dict[str, str], list[str]]:
    if not isinstance(raw_calls, list) or not raw_calls:
        return {}, [f"{where}.tool_calls: must be a non-empty array (omit the key instead)"]
    problems: list[str] = []
    calls: dict[str, str] = {}
    for position, call in enumerate(raw_calls):
        at = f"{where}.tool_calls[{position}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            problems.append(f"{at}.function: an object is required")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{at}.function.name: a non-empty string is required")
            name = ""
        # ToolCallFunctionArguments decodes objects only (ollama/ollama#10604).
        if not isinstance(function.get("arguments"), Mapping):
            problems.append(f"{at}.function.arguments: must be an object, not a JSON string")
        if "index" in function and (
            isinstance(function["index"], bool) or not isinstance(function["index"], int)
        ):
            problems.append(f"{at}.function.index: must be an integer")
        call_id = call.get("id")
        if call_id is None:
            call_id = f"#{position}"  # the documented minimal form has no id
        elif not isinstance(call_id, str) or not call_id:
            problems.append(f"{at}.id: must be a non-empty string when present")
            continue
        if call_id in calls:
            problems.append(f"{at}.id: {call_id!r} appears twice in one turn")
        calls[call_id] = name
    return calls, problems


def _result_problems(message: Mapping[str, Any], where: str, pending: dict[str, str]) -> list[str]:
    name = message.get("tool_name")
    if not isinstance(name, str) or not name:
        return [f"{where}.tool_name: required (the model is told which tool answered)"]
    call_id = message.get("tool_call_id")
    if call_id is not None:
        if not isinstance(call_id, str) or call_id not in pending:
            return [f"{where}.tool_call_id: {call_id!r} answers no pending call of the last turn"]
        if pending[call_id] != name:
            return [f"{where}.tool_name: {name!r} but call {call_id!r} is {pending[call_id]!r}"]
        del pending[call_id]
        return []
    # Without an id, the result pairs with the first pending call of that name.
    for pending_id, pending_name in pending.items():
        if pending_name == name:
            del pending[pending_id]
            return []
    return [f"{where}.tool_name: {name!r} answers no pending call of the last turn"]
