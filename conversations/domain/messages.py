"""Chat messages and tool calls: one validated value object for all four roles."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from conversations.exceptions import InvalidArgumentError

from .storable import dumps_compact, json_depth, max_arguments_depth, text_depth_excess

__all__ = ["ChatMessage", "Role", "ToolCall", "normalise_messages"]


class Role(StrEnum):
    """The four roles of a chat message, in their canonical order."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


_VALID_ROLES = ", ".join(r.value for r in Role)


def _reject_constant(token: str) -> Any:
    # json.loads accepts NaN/Infinity by default; they are not JSON and would
    # fail on the way out, so text carrying them is treated as not-an-object.
    raise ValueError(token)


def encode_arguments(arguments: Mapping[str, Any]) -> str:
    """Compact JSON text for an arguments object; ``{}`` when empty, never ``[]``."""
    return json.dumps(dict(arguments), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def decode_arguments(text: str) -> dict[str, Any] | None:
    """Decode argument text; ``None`` when it is not a JSON object, or nests too deeply.

    The depth is measured on the text before ``json.loads`` recurses into it.
    """
    if text_depth_excess(text, max_arguments_depth()) is not None:
        return None
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for, as it travels through every layer."""

    id: str
    """The provider's call id; answered by a tool message's ``tool_call_id``."""
    name: str
    """The tool's name."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """The decoded arguments: always a JSON object (empty when there are none)."""
    type: str = "function"
    """The call type; every provider we speak uses ``function``."""
    raw_arguments: str | None = None
    """The provider's original argument text when it was not a JSON object.

    Then ``arguments`` is empty and the call must never be executed."""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InvalidArgumentError(
                f"tool call id must be a non-empty string, got {self.id!r}",
                code="empty_tool_call_id",
                field="id",
            )
        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgumentError(
                f"tool call name must be a non-empty string, got {self.name!r}",
                code="empty_tool_name",
                field="function/name",
            )
        if not isinstance(self.type, str) or not self.type:
            raise InvalidArgumentError(
                f"tool call type must be a non-empty string, got {self.type!r}",
                code="empty_tool_type",
                field="type",
            )
        if not isinstance(self.arguments, Mapping):
            raise InvalidArgumentError(
                f"tool call arguments must be a JSON object, got {_type_name(self.arguments)}",
                code="invalid_arguments",
                field="function/arguments",
            )
        arguments = dict(self.arguments)
        if self.raw_arguments is None and json_depth(arguments) > max_arguments_depth():
            # Too deep to execute safely: kept as text, like any other raw arguments,
            # so the call is stored and answered but never run.
            try:
                raw = dumps_compact(arguments)
            except (TypeError, ValueError) as exc:
                raise InvalidArgumentError(
                    f"tool call arguments are not JSON-serialisable: {exc}",
                    code="invalid_arguments",
                    field="function/arguments",
                ) from None
            object.__setattr__(self, "raw_arguments", raw)
            object.__setattr__(self, "arguments", {})
            return
        if any(not isinstance(key, str) for key in arguments):
            raise InvalidArgumentError(
                "tool call argument names must be strings",
                code="invalid_arguments",
                field="function/arguments",
            )
        try:
            encoded = encode_arguments(arguments)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"tool call arguments are not JSON-serialisable: {exc}",
                code="invalid_arguments",
                field="function/arguments",
            ) from None
        if self.raw_arguments is not None:
            if not isinstance(self.raw_arguments, str) or not self.raw_arguments:
                raise InvalidArgumentError(
                    "raw_arguments must be a non-empty string or None",
                    code="invalid_arguments",
                    field="function/arguments",
                )
            if arguments:
                raise InvalidArgumentError(
                    "a call with raw_arguments must have empty decoded arguments",
                    code="invalid_arguments",
                    field="function/arguments",
                )
            # Text that is a JSON object belongs in ``arguments``: kept raw, it
            # would come back decoded from the wire and break the round trip.
            if decode_arguments(self.raw_arguments) is not None:
                raise InvalidArgumentError(
                    f"raw_arguments {self.raw_arguments!r} is a JSON object; "
                    "pass it decoded as arguments",
                    code="invalid_arguments",
                    field="function/arguments",
                )
        # A deep private copy in JSON form (tuples become lists), so a caller
        # mutating its data cannot change this value and the wire round trip
        # gives back an equal call.
        object.__setattr__(self, "arguments", json.loads(encoded))

    @property
    def arguments_json(self) -> str:
        """The arguments as the OpenAI wire string (the raw text when there is one)."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        return encode_arguments(self.arguments)

    def to_wire(self) -> dict[str, Any]:
        """The OpenAI request shape: ``arguments`` as a compact JSON string."""
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": self.arguments_json},
        }

    def to_dict(self) -> dict[str, Any]:
        """The decoded shape: ``arguments`` as an object (plus ``raw_arguments`` if set)."""
        data: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": dict(self.arguments)},
        }
        if self.raw_arguments is not None:
            data["raw_arguments"] = self.raw_arguments
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """Build from the wire shape (string arguments) or the decoded shape (object)."""
        if not isinstance(data, Mapping):
            raise InvalidArgumentError(
                f"a tool call must be an object, got {_type_name(data)}",
                code="invalid_tool_call",
            )
        function = data.get("function")
        if not isinstance(function, Mapping):
            function = {}
        call_id = data.get("id")
        name = function.get("name")
        call_type = data.get("type") or "function"
        raw = function.get("arguments")
        arguments: dict[str, Any] = {}
        raw_arguments: str | None = None
        if raw is None or raw == "":
            pass
        elif isinstance(raw, Mapping):
            arguments = dict(raw)
        elif isinstance(raw, str):
            decoded = decode_arguments(raw)
            if decoded is None:
                raw_arguments = raw
            else:
                arguments = decoded
        else:
            raise InvalidArgumentError(
                f"tool call arguments must be a JSON object or its text, got {_type_name(raw)}",
                code="invalid_arguments",
                field="function/arguments",
            )
        stored_raw = data.get("raw_arguments")
        if isinstance(stored_raw, str) and stored_raw and not arguments:
            raw_arguments = stored_raw
        return cls(
            id=call_id if isinstance(call_id, str) else "",
            name=name if isinstance(name, str) else "",
            arguments=arguments,
            type=call_type if isinstance(call_type, str) else "",
            raw_arguments=raw_arguments,
        )

    @classmethod
    def try_from_dict(cls, data: Mapping[str, Any]) -> ToolCall | None:
        """Like :meth:`from_dict`, but ``None`` instead of an error (untrusted input)."""
        try:
            return cls.from_dict(data)
        except InvalidArgumentError:
            return None


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """A chat message of any role; tool calls only on assistant, call ids only on tool."""

    role: Role
    """One of :class:`Role`; a matching string is accepted and converted."""
    content: str
    """The text; never ``None`` (an assistant turn with only calls has ``""``)."""
    tool_calls: tuple[ToolCall, ...] | None = None
    """The calls of an assistant turn: ``None`` or a non-empty tuple."""
    tool_call_id: str | None = None
    """On a tool message: the id of the call it answers."""
    provider_metadata: Mapping[str, Any] | None = field(default=None, compare=False)
    """Opaque data a provider needs replayed (reasoning signatures, native ids).

    Not part of the message's identity nor of its wire form (``to_dict``)."""
    is_error: bool = False
    """On a tool message: the result reports a failure, not a value.

    Providers with a native flag receive it (Anthropic's ``is_error``,
    Gemini's ``error`` response); the OpenAI shape has none, so ``to_dict``
    leaves it out."""

    def __post_init__(self) -> None:
        role = self.role
        if not isinstance(role, Role):
            if not isinstance(role, str) or role not in Role._value2member_map_:
                raise InvalidArgumentError(
                    f'Invalid role "{role}". Valid roles: {_VALID_ROLES}',
                    code="invalid_role",
                    field="role",
                )
            object.__setattr__(self, "role", Role(role))
        if self.tool_calls is not None:
            if self.role is not Role.ASSISTANT:
                raise InvalidArgumentError(
                    f'tool calls are only allowed on assistant messages, got role "{self.role}"',
                    code="tool_calls_not_allowed",
                    field="tool_calls",
                )
            if isinstance(self.tool_calls, str | bytes | Mapping) or not isinstance(
                self.tool_calls, Sequence
            ):
                raise InvalidArgumentError(
                    f"tool_calls must be a list, got {_type_name(self.tool_calls)}",
                    code="invalid_tool_calls",
                    field="tool_calls",
                )
            calls = tuple(self.tool_calls)
            if not calls:
                raise InvalidArgumentError(
                    "an assistant tool-call message needs at least one tool call",
                    code="empty_tool_calls",
                    field="tool_calls",
                )
            seen: set[str] = set()
            for index, call in enumerate(calls):
                if not isinstance(call, ToolCall):
                    raise InvalidArgumentError(
                        f"every tool call must be a ToolCall, got {_type_name(call)}",
                        code="invalid_tool_call",
                        field=f"tool_calls/{index}",
                    )
                if call.id in seen:
                    raise InvalidArgumentError(
                        f'tool call id "{call.id}" appears twice in one assistant turn',
                        code="duplicate_tool_call_id",
                        field=f"tool_calls/{index}/id",
                    )
                seen.add(call.id)
            object.__setattr__(self, "tool_calls", calls)
        if self.tool_call_id is not None:
            if self.role is not Role.TOOL:
                raise InvalidArgumentError(
                    f'tool_call_id is only allowed on tool messages, got role "{self.role}"',
                    code="tool_call_id_not_allowed",
                    field="tool_call_id",
                )
            if not isinstance(self.tool_call_id, str):
                raise InvalidArgumentError(
                    f"tool_call_id must be a string, got {_type_name(self.tool_call_id)}",
                    code="invalid_tool_call_id",
                    field="tool_call_id",
                )
            if self.tool_call_id == "":
                raise InvalidArgumentError(
                    "a tool message needs a non-empty tool_call_id",
                    code="empty_tool_call_id",
                    field="tool_call_id",
                )
        if not isinstance(self.content, str):
            raise InvalidArgumentError(
                f"content must be a string, got {_type_name(self.content)}",
                code="invalid_content",
                field="content",
            )
        if not isinstance(self.is_error, bool):
            raise InvalidArgumentError(
                f"is_error must be a boolean, got {_type_name(self.is_error)}",
                code="invalid_is_error",
                field="is_error",
            )
        if self.is_error and self.role is not Role.TOOL:
            raise InvalidArgumentError(
                f'is_error is only allowed on tool messages, got role "{self.role}"',
                code="is_error_not_allowed",
                field="is_error",
            )
        if self.provider_metadata is not None:
            if not isinstance(self.provider_metadata, Mapping):
                raise InvalidArgumentError(
                    "provider_metadata must be an object",
                    code="invalid_provider_metadata",
                    field="provider_metadata",
                )
            object.__setattr__(self, "provider_metadata", dict(self.provider_metadata))

    # Named constructors -------------------------------------------------------

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        """A system message."""
        return cls(Role.SYSTEM, content)

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        """A user message."""
        return cls(Role.USER, content)

    @classmethod
    def assistant(cls, content: str) -> ChatMessage:
        """A plain assistant message (no tool calls)."""
        return cls(Role.ASSISTANT, content)

    @classmethod
    def tool(cls, content: str) -> ChatMessage:
        """A tool message without a call id (prefer :meth:`tool_result`)."""
        return cls(Role.TOOL, content)

    @classmethod
    def assistant_tool_calls(
        cls,
        tool_calls: Iterable[ToolCall],
        content: str | None = None,
        *,
        provider_metadata: Mapping[str, Any] | None = None,
    ) -> ChatMessage:
        """An assistant turn carrying calls; ``None`` content is stored as ``""``."""
        return cls(
            Role.ASSISTANT,
            "" if content is None else content,
            tool_calls=tuple(tool_calls),
            provider_metadata=provider_metadata,
        )

    @classmethod
    def tool_result(cls, tool_call_id: str, content: str, *, is_error: bool = False) -> ChatMessage:
        """The answer to one tool call; ``is_error`` when it reports a failure."""
        return cls(Role.TOOL, content, tool_call_id=tool_call_id, is_error=is_error)

    # Serialisation -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI request shape; a plain message is exactly ``{role, content}``."""
        data: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls is not None:
            data["tool_calls"] = [call.to_wire() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        return data

    def to_json(self) -> str:
        """Compact JSON of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatMessage:
        """Build from the OpenAI shape (plus an optional ``is_error``); unknown keys are ignored."""
        if not isinstance(data, Mapping):
            raise InvalidArgumentError(
                f"a message must be an object, got {_type_name(data)}",
                code="invalid_message",
            )
        role = data.get("role")
        if not isinstance(role, str):
            raise InvalidArgumentError(
                f"a message needs a string role, got {_type_name(role)}",
                code="missing_role",
                field="role",
            )
        raw_calls = data.get("tool_calls")
        calls: list[ToolCall] | None = None
        if raw_calls is not None:
            if not isinstance(raw_calls, list | tuple):
                raise InvalidArgumentError(
                    f"tool_calls must be a list, got {_type_name(raw_calls)}",
                    code="invalid_tool_calls",
                    field="tool_calls",
                )
            calls = []
            for index, item in enumerate(raw_calls):
                if isinstance(item, ToolCall):
                    calls.append(item)
                elif isinstance(item, Mapping):
                    try:
                        calls.append(ToolCall.from_dict(item))
                    except InvalidArgumentError as exc:
                        raise exc.at(f"tool_calls/{index}") from None
                else:
                    raise InvalidArgumentError(
                        f"a tool call must be an object, got {_type_name(item)}",
                        code="invalid_tool_call",
                        field=f"tool_calls/{index}",
                    )
        tool_call_id = data.get("tool_call_id")
        if tool_call_id is not None and not isinstance(tool_call_id, str):
            raise InvalidArgumentError(
                f"tool_call_id must be a string, got {_type_name(tool_call_id)}",
                code="invalid_tool_call_id",
                field="tool_call_id",
            )
        content = data.get("content")
        if content is None and calls is not None:
            content = ""
        if not isinstance(content, str):
            raise InvalidArgumentError(
                f"content must be a string, got {_type_name(content)}",
                code="invalid_content",
                field="content",
            )
        is_error = data.get("is_error", False)
        if not isinstance(is_error, bool):
            raise InvalidArgumentError(
                f"is_error must be a boolean, got {_type_name(is_error)}",
                code="invalid_is_error",
                field="is_error",
            )
        return cls(
            role,  # type: ignore[arg-type]
            content,
            tool_calls=None if calls is None else tuple(calls),
            tool_call_id=tool_call_id,
            is_error=is_error,
        )


def normalise_messages(items: Iterable[ChatMessage | Mapping[str, Any]]) -> list[ChatMessage]:
    """Messages as value objects: instances pass through, mappings are validated.

    An invalid item raises its :class:`InvalidArgumentError` with ``field``
    prefixed by the item's index.
    """
    result: list[ChatMessage] = []
    for index, item in enumerate(items):
        if isinstance(item, ChatMessage):
            result.append(item)
            continue
        try:
            result.append(ChatMessage.from_dict(item))
        except InvalidArgumentError as exc:
            raise exc.at(index) from None
    return result
