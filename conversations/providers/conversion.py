"""Conversion helpers every adapter shares (re-exported by ``base``).

Pure functions between the value objects and the vendors' wire shapes:
system prompts, argument objects, call ids, token counts and id aliases.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from conversations.domain import ChatMessage, InvalidArgumentError, Role, ToolCall, ToolSpec
from conversations.domain.messages import decode_arguments
from conversations.exceptions import ProviderResponseError

__all__ = [
    "answered_call_id",
    "arguments_object",
    "assign_call_ids",
    "fresh_call_id",
    "join_system_messages",
    "known_call_ids",
    "require_offered_tool",
    "stable_alias",
    "token_count",
]

logger = logging.getLogger("conversations.providers")


def join_system_messages(messages: Iterable[ChatMessage]) -> str:
    """Every system message's text, in order, joined by a blank line (none dropped)."""
    return "\n\n".join(m.content for m in messages if m.role is Role.SYSTEM and m.content)


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """Arguments for wires that need an object: raw (non-object) text becomes ``{}``."""
    wire = call.to_wire()["function"]["arguments"]
    decoded = decode_arguments(wire)
    return decoded if decoded is not None else {}


def fresh_call_id(prefix: str = "call_") -> str:
    """A new call id, unique for all practical purposes (122 random bits)."""
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def assign_call_ids(
    candidates: Sequence[tuple[str | None, str, Any]],
    *,
    known_ids: Collection[str] = (),
    provider: str,
) -> tuple[ToolCall, ...] | None:
    """Turn parsed ``(id, name, arguments)`` triples into tool calls.

    ``arguments`` may be an object, a JSON string, ``None`` or ``""``. A call
    without a name is dropped with a warning (it cannot be executed or
    answered); a missing id, or one already used in this response or in
    ``known_ids`` (the conversation so far), is replaced by a fresh one.
    Returns ``None`` when no call is left, never an empty tuple.
    """
    used = set(known_ids)
    calls: list[ToolCall] = []
    for position, (call_id, name, arguments) in enumerate(candidates):
        if not isinstance(name, str) or not name:
            logger.warning("%s response: dropped tool call #%d without a name", provider, position)
            continue
        if not isinstance(call_id, str) or not call_id or call_id in used:
            call_id = fresh_call_id()
        used.add(call_id)
        call = ToolCall.try_from_dict(
            {"id": call_id, "function": {"name": name, "arguments": arguments}}
        )
        if call is None:
            # Arguments of an unusable type (a list, a number): keep the text.
            raw = json.dumps(arguments, ensure_ascii=False)
            call = ToolCall(id=call_id, name=name, raw_arguments=raw)
        calls.append(call)
    return tuple(calls) if calls else None


def token_count(value: Any, name: str, *, provider: str = "") -> int:
    """A token counter from a response: missing is 0, anything but a count is an error."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        prefix = f"{provider}: " if provider else ""
        raise ProviderResponseError(f"{prefix}{name} is not a count: {value!r}")
    return value


def known_call_ids(messages: Iterable[ChatMessage]) -> frozenset[str]:
    """Every call id already used in ``messages``."""
    return frozenset(call.id for m in messages if m.tool_calls is not None for call in m.tool_calls)


def stable_alias(value: str, *, pattern: re.Pattern[str], length: int | None = None) -> str:
    """Rewrite an id for a provider with stricter id rules, deterministically.

    An id that already fits ``pattern`` (and ``length``) is kept. Otherwise the
    result is derived from a hash of the whole id, so a call and the result
    answering it always map to the same alias, and two different ids do not
    collide in practice.
    """
    if pattern.fullmatch(value) and (length is None or len(value) == length):
        return value
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()
    if length is not None:
        alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        number = int(digest, 16)
        chars = []
        for _ in range(length):
            number, rest = divmod(number, len(alphabet))
            chars.append(alphabet[rest])
        return "".join(chars)
    cleaned = re.sub(r"[^a-zA-Z0-9_-]", "_", value)[:40]
    return f"{cleaned}_{digest[:12]}"


def require_offered_tool(name: str, tools: Sequence[ToolSpec]) -> None:
    """A ``tool_choice`` naming one tool must name one of the tools offered."""
    if name not in {spec.name for spec in tools}:
        raise InvalidArgumentError(
            f"tool_choice names {name!r}, which is not among the offered tools",
            code="unknown_tool_choice",
            field="tool_choice",
        )


def answered_call_id(message: ChatMessage, index: int, seen_calls: Collection[str]) -> str:
    """The call id the tool ``message`` (at ``index``) answers: one of ``seen_calls``, else an error."""
    if message.tool_call_id is None:
        raise InvalidArgumentError(
            "a tool message needs the id of the call it answers",
            code="missing_tool_call_id",
            field=f"{index}/tool_call_id",
        )
    if message.tool_call_id not in seen_calls:
        raise InvalidArgumentError(
            f"tool message answers {message.tool_call_id!r}, which no earlier call has",
            code="unknown_tool_call_id",
            field=f"{index}/tool_call_id",
        )
    return message.tool_call_id
