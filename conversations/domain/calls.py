"""A tool call the model asked for, and the JSON text of its arguments."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conversations.exceptions import InvalidArgumentError

from .storable import dumps_compact, json_depth, max_arguments_depth, text_depth_excess

__all__ = ["ToolCall", "decode_arguments", "encode_arguments", "type_name"]


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


def type_name(value: object) -> str:
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
                f"tool call arguments must be a JSON object, got {type_name(self.arguments)}",
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
                f"a tool call must be an object, got {type_name(data)}",
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
                f"tool call arguments must be a JSON object or its text, got {type_name(raw)}",
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
