"""What a streaming provider yields: deltas while the answer grows, then the whole answer.

A stream is a sequence of :class:`TextDelta`, :class:`ReasoningDelta` and
:class:`ToolCallDelta` values followed, last and exactly once, by the complete
:class:`~conversations.domain.CompletionResponse`. The deltas are for showing
progress only: what is stored is the final response, which equals what the
same answer sent whole would have produced.
"""

from __future__ import annotations

from dataclasses import dataclass

from conversations.exceptions import InvalidArgumentError

from .responses import CompletionResponse

__all__ = ["ReasoningDelta", "StreamEvent", "TextDelta", "ToolCallDelta"]


def _require_text(value: object, field: str) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentError(
            f"{field} must be a string, got {type(value).__name__}",
            code="invalid_delta",
            field=field,
        )


@dataclass(frozen=True, slots=True)
class TextDelta:
    """The next piece of the answer's text."""

    text: str

    def __post_init__(self) -> None:
        _require_text(self.text, "text")


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """The next piece of the reasoning text the provider exposes."""

    text: str

    def __post_init__(self) -> None:
        _require_text(self.text, "text")


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of the tool call at ``index`` of the turn.

    ``id`` and ``name`` arrive once (usually with the first piece) and are
    ``None`` afterwards; ``arguments`` is the next fragment of the arguments'
    JSON text (``""`` when the piece only carries the id and name). Joined in
    order, the fragments of one index are the call's argument text.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < 0:
            raise InvalidArgumentError(
                f"index must be a non-negative integer, got {self.index!r}",
                code="invalid_delta",
                field="index",
            )
        for name in ("id", "name"):
            value = getattr(self, name)
            if value is not None:
                _require_text(value, name)
        _require_text(self.arguments, "arguments")


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | CompletionResponse
"""One item of a provider's stream."""
