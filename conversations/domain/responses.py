"""What a provider answers: token usage and one completion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

from conversations.exceptions import InvalidArgumentError

from .messages import ChatMessage, Role, ToolCall
from .provider_tools import ProviderToolActivity, SourceCitation

__all__ = ["USAGE_FIELDS", "CompletionResponse", "Usage"]


@dataclass(frozen=True, slots=True, init=False)
class Usage:
    """Token counts of one or more completions; ``+`` adds them field by field."""

    prompt_tokens: int
    """Input tokens, cached ones included."""
    completion_tokens: int
    """Output tokens, reasoning included."""
    total_tokens: int
    """Defaults to prompt + completion."""
    cached_prompt_tokens: int
    """The part of ``prompt_tokens`` served from a cache."""
    reasoning_tokens: int
    """The part of ``completion_tokens`` spent reasoning."""
    estimated: bool
    """The counts are guessed from the text (the provider reported none), not the provider's."""

    def __init__(
        self,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        total_tokens: int | None = None,
        cached_prompt_tokens: int = 0,
        reasoning_tokens: int = 0,
        *,
        estimated: bool = False,
    ) -> None:
        values = (
            prompt_tokens,
            completion_tokens,
            total_tokens,
            cached_prompt_tokens,
            reasoning_tokens,
        )
        for name, value in zip(USAGE_FIELDS, values, strict=True):
            if value is None and name == "total_tokens":
                # Summed only here, once both parts have passed the check below.
                value = self.prompt_tokens + self.completion_tokens
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(
                    f"{name} must be a non-negative integer, got {value!r}",
                    code="invalid_usage",
                    field=name,
                )
            object.__setattr__(self, name, value)
        if not isinstance(estimated, bool):
            raise InvalidArgumentError(
                f"estimated must be a boolean, got {estimated!r}",
                code="invalid_usage",
                field="estimated",
            )
        object.__setattr__(self, "estimated", estimated)

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            *(getattr(self, n) + getattr(other, n) for n in USAGE_FIELDS),
            estimated=self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, int]:
        """The counts as a plain dict."""
        return {name: getattr(self, name) for name in USAGE_FIELDS}


USAGE_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in fields(Usage) if f.name != "estimated")
"""The token counts of :class:`Usage`, in its order: the names of the usage columns of
messages and runs, of the API's ``usage`` objects and of the run's counter update
(``estimated`` is a flag on the counts, not a count)."""


@dataclass(frozen=True, slots=True)
class CompletionResponse:
    """One answer of a model: text and/or tool calls, with usage."""

    content: str
    """The text (``""`` when the model only called tools)."""
    model: str
    """The model that answered, as the provider names it."""
    usage: Usage = field(default_factory=Usage)
    """Token counts of this completion."""
    finish_reason: str = "stop"
    """OpenAI vocabulary: ``stop``, ``length``, ``tool_calls``, ``content_filter``."""
    provider: str = ""
    """Which adapter produced it (``openai``, ``anthropic``, ...)."""
    tool_calls: tuple[ToolCall, ...] | None = None
    """The calls asked for; ``None`` or non-empty, never an empty tuple."""
    thinking: str | None = None
    """Reasoning text the provider exposed, if any."""
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)
    """Opaque data the provider needs replayed with this turn later."""
    provider_tool_calls: tuple[ProviderToolActivity, ...] = ()
    """The calls of tools the provider ran itself while answering (stored as rows)."""
    citations: tuple[SourceCitation, ...] = ()
    """The passages of ``content`` the provider backed with a source (stored as rows)."""

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):
            raise InvalidArgumentError(
                "completion content must be a string", code="invalid_content", field="content"
            )
        if not isinstance(self.usage, Usage):
            raise InvalidArgumentError("usage must be a Usage", code="invalid_usage", field="usage")
        if self.tool_calls is not None:
            if not isinstance(self.tool_calls, Sequence) or isinstance(self.tool_calls, str):
                raise InvalidArgumentError(
                    "tool_calls must be a list", code="invalid_tool_calls", field="tool_calls"
                )
            calls = tuple(self.tool_calls)
            if not calls:
                raise InvalidArgumentError(
                    "tool_calls must be None or non-empty",
                    code="empty_tool_calls",
                    field="tool_calls",
                )
            for index, call in enumerate(calls):
                if not isinstance(call, ToolCall):
                    raise InvalidArgumentError(
                        "every tool call must be a ToolCall",
                        code="invalid_tool_call",
                        field=f"tool_calls/{index}",
                    )
            object.__setattr__(self, "tool_calls", calls)
        object.__setattr__(self, "provider_metadata", dict(self.provider_metadata))
        activity = tuple(self.provider_tool_calls)
        if not all(isinstance(item, ProviderToolActivity) for item in activity):
            raise InvalidArgumentError(
                "every provider tool call must be a ProviderToolActivity",
                code="invalid_provider_tool_call",
                field="provider_tool_calls",
            )
        citations = tuple(self.citations)
        if not all(isinstance(item, SourceCitation) for item in citations):
            raise InvalidArgumentError(
                "every citation must be a SourceCitation",
                code="invalid_citation",
                field="citations",
            )
        object.__setattr__(self, "provider_tool_calls", activity)
        object.__setattr__(self, "citations", citations)

    @property
    def has_tool_calls(self) -> bool:
        """Whether the model asked for at least one tool call."""
        return self.tool_calls is not None

    def to_message(self) -> ChatMessage:
        """The assistant message to append to the history."""
        metadata = self.provider_metadata or None
        if self.tool_calls is not None:
            return ChatMessage.assistant_tool_calls(
                self.tool_calls, self.content, provider_metadata=metadata
            )
        return ChatMessage(Role.ASSISTANT, self.content, provider_metadata=metadata)
