"""Pairing tool results with the call turn right before them, for wires that group results.

Anthropic and Gemini both want every result of a call turn in ONE following
user turn, in call order, each answering a call of that very turn. The
OpenAI-shaped history keeps one tool message per result, so the adapters
collect the run of tool messages with :class:`OwedResults` and close it when
the next turn starts; a history breaking the rules raises
:class:`InvalidArgumentError` instead of being sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from conversations.domain import ChatMessage, InvalidArgumentError

__all__ = ["OwedResults"]

Part = TypeVar("Part")


class OwedResults(Generic[Part]):
    """The results owed to the last call turn, collected as wire parts, in call order.

    Built with no calls (``index=-1``) when nothing is owed: every tool message
    is then an orphan. ``refusal`` finishes the message of an unanswered call
    (why the provider needs every call answered).
    """

    def __init__(self, *, index: int = -1, call_ids: Sequence[str] = (), refusal: str = "") -> None:
        self.index = index
        """Position of the call turn in the history (for error fields)."""
        self.order = {call_id: position for position, call_id in enumerate(call_ids)}
        """Call id -> its position in the call turn."""
        self.refusal = refusal
        self.parts: dict[str, Part] = {}

    @property
    def owed(self) -> bool:
        """Whether a call turn is waiting for its results."""
        return bool(self.order)

    def answered_call(self, message: ChatMessage, index: int) -> str:
        """The id of the call the tool ``message`` (at ``index``) answers, checked.

        Raises :class:`InvalidArgumentError` for a tool message without a call
        id, one answering a call that is not in the call turn right before it,
        and a call answered twice.
        """
        call_id = message.tool_call_id
        if call_id is None:
            raise InvalidArgumentError(
                "a tool message needs the id of the call it answers",
                code="missing_tool_call_id",
                field=f"{index}/tool_call_id",
            )
        if call_id not in self.order:
            raise InvalidArgumentError(
                f"tool message answers {call_id!r}, which is not a call of the assistant "
                "turn right before it",
                code="unknown_tool_call_id",
                field=f"{index}/tool_call_id",
            )
        if call_id in self.parts:
            raise InvalidArgumentError(
                f"call {call_id!r} is answered twice",
                code="duplicate_tool_result",
                field=f"{index}/tool_call_id",
            )
        return call_id

    def add(self, call_id: str, part: Part) -> None:
        """Record the wire part answering ``call_id`` (checked by :meth:`answered_call`)."""
        self.parts[call_id] = part

    def close(self) -> list[Part]:
        """The parts in call order; every call must be answered."""
        missing = [call_id for call_id in self.order if call_id not in self.parts]
        if missing:
            raise InvalidArgumentError(
                f"tool call(s) {', '.join(map(repr, missing))} have no result before the "
                f"next turn; {self.refusal}",
                code="unanswered_tool_call",
                field=f"{self.index}/tool_calls/{self.order[missing[0]]}/id",
            )
        return [self.parts[call_id] for call_id in self.order]
