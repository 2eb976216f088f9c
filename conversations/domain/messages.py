"""Chat messages: one validated value object for all four roles (tool calls in ``calls``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from conversations.exceptions import InvalidArgumentError

from .calls import ToolCall, decode_arguments, encode_arguments, type_name
from .parts import FilePart, content_from_wire, content_to_wire

__all__ = [
    "ChatMessage",
    "Role",
    "ToolCall",
    "decode_arguments",
    "encode_arguments",
    "normalise_messages",
]


class Role(StrEnum):
    """The four roles of a chat message, in their canonical order."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


_VALID_ROLES = ", ".join(r.value for r in Role)


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
    parts: tuple[FilePart, ...] = ()
    """Files beside the text (images, PDFs, text files): on user and tool messages only."""

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
                    f"tool_calls must be a list, got {type_name(self.tool_calls)}",
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
                        f"every tool call must be a ToolCall, got {type_name(call)}",
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
                    f"tool_call_id must be a string, got {type_name(self.tool_call_id)}",
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
                f"content must be a string, got {type_name(self.content)}",
                code="invalid_content",
                field="content",
            )
        if not isinstance(self.is_error, bool):
            raise InvalidArgumentError(
                f"is_error must be a boolean, got {type_name(self.is_error)}",
                code="invalid_is_error",
                field="is_error",
            )
        if self.is_error and self.role is not Role.TOOL:
            raise InvalidArgumentError(
                f'is_error is only allowed on tool messages, got role "{self.role}"',
                code="is_error_not_allowed",
                field="is_error",
            )
        if self.parts:
            self._check_parts()
        if self.provider_metadata is not None:
            if not isinstance(self.provider_metadata, Mapping):
                raise InvalidArgumentError(
                    "provider_metadata must be an object",
                    code="invalid_provider_metadata",
                    field="provider_metadata",
                )
            object.__setattr__(self, "provider_metadata", dict(self.provider_metadata))

    def _check_parts(self) -> None:
        if self.role not in (Role.USER, Role.TOOL):
            raise InvalidArgumentError(
                f'file parts are only allowed on user and tool messages, got role "{self.role}"',
                code="parts_not_allowed",
                field="parts",
            )
        parts = tuple(self.parts) if isinstance(self.parts, list | tuple) else None
        if parts is None or not all(isinstance(part, FilePart) for part in parts):
            raise InvalidArgumentError(
                "parts must be a list of FilePart", code="invalid_parts", field="parts"
            )
        object.__setattr__(self, "parts", parts)

    # Named constructors -------------------------------------------------------

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        """A system message."""
        return cls(Role.SYSTEM, content)

    @classmethod
    def user(cls, content: str, *, parts: Iterable[FilePart] = ()) -> ChatMessage:
        """A user message, with files beside its text if ``parts``."""
        return cls(Role.USER, content, parts=tuple(parts))

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
    def tool_result(
        cls,
        tool_call_id: str,
        content: str,
        *,
        is_error: bool = False,
        parts: Iterable[FilePart] = (),
    ) -> ChatMessage:
        """The answer to one tool call; ``is_error`` when it reports a failure; files in ``parts``."""
        return cls(
            Role.TOOL, content, tool_call_id=tool_call_id, is_error=is_error, parts=tuple(parts)
        )

    # Serialisation -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI request shape; a plain message is exactly ``{role, content}``.

        With parts, ``content`` is an array of ``text``, ``image_url`` and ``file``
        items (``domain.parts``); the parts must hold their bytes.
        """
        content = content_to_wire(self.content, self.parts)
        data: dict[str, Any] = {"role": self.role.value, "content": content}
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
                f"a message must be an object, got {type_name(data)}",
                code="invalid_message",
            )
        role = data.get("role")
        if not isinstance(role, str):
            raise InvalidArgumentError(
                f"a message needs a string role, got {type_name(role)}",
                code="missing_role",
                field="role",
            )
        raw_calls = data.get("tool_calls")
        calls: list[ToolCall] | None = None
        if raw_calls is not None:
            if not isinstance(raw_calls, list | tuple):
                raise InvalidArgumentError(
                    f"tool_calls must be a list, got {type_name(raw_calls)}",
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
                        f"a tool call must be an object, got {type_name(item)}",
                        code="invalid_tool_call",
                        field=f"tool_calls/{index}",
                    )
        tool_call_id = data.get("tool_call_id")
        if tool_call_id is not None and not isinstance(tool_call_id, str):
            raise InvalidArgumentError(
                f"tool_call_id must be a string, got {type_name(tool_call_id)}",
                code="invalid_tool_call_id",
                field="tool_call_id",
            )
        content = data.get("content")
        if content is None and calls is not None:
            content = ""
        parts: tuple[FilePart, ...] = ()
        if isinstance(content, list | tuple):
            content, parts = content_from_wire(content)
        if not isinstance(content, str):
            raise InvalidArgumentError(
                f"content must be a string, got {type_name(content)}",
                code="invalid_content",
                field="content",
            )
        is_error = data.get("is_error", False)
        if not isinstance(is_error, bool):
            raise InvalidArgumentError(
                f"is_error must be a boolean, got {type_name(is_error)}",
                code="invalid_is_error",
                field="is_error",
            )
        return cls(
            role,  # type: ignore[arg-type]
            content,
            tool_calls=None if calls is None else tuple(calls),
            tool_call_id=tool_call_id,
            is_error=is_error,
            parts=parts,
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
