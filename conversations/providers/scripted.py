"""A provider that plays back a script, for tests (ours and our users').

Queue what the "model" should answer, run the code under test, then look at
what it was asked::

    provider = ScriptedProvider([
        scripted_calls(("get_weather", {"city": "Leipzig"})),
        scripted_text("It is sunny."),
    ])
    run = run_tool_loop(conversation=c, content="Weather?", provider=provider)
    assert provider.requests[1].messages[-1].role == "tool"

An entry may be a :class:`CompletionResponse`, an exception (raised instead of
answering) or a callable ``(messages, tools, options) -> CompletionResponse``.
Asking more often than the script allows raises :class:`ScriptExhausted`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    StreamEvent,
    ToolCall,
    ToolSpec,
    Usage,
)

from .base import CompletionOptions, fresh_call_id
from .streaming import deltas_of

__all__ = [
    "ScriptExhausted",
    "ScriptedProvider",
    "ScriptedRequest",
    "scripted_calls",
    "scripted_text",
]

Responder = Callable[
    [Sequence[ChatMessage], Sequence[ToolSpec], CompletionOptions], CompletionResponse
]
ScriptEntry = CompletionResponse | BaseException | Responder


class ScriptExhausted(AssertionError):
    """The code under test asked the scripted provider more often than scripted."""


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """One request the scripted provider received."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    options: CompletionOptions


def scripted_text(
    content: str, *, usage: Usage | None = None, model: str = "scripted"
) -> CompletionResponse:
    """A final text answer."""
    return CompletionResponse(
        content=content, model=model, usage=usage or Usage(), provider="scripted"
    )


def scripted_calls(
    *calls: tuple[str, Mapping[str, Any]] | ToolCall,
    content: str = "",
    usage: Usage | None = None,
    model: str = "scripted",
) -> CompletionResponse:
    """An answer asking for tool calls: ``(name, arguments)`` pairs or ready ``ToolCall``s."""
    built = tuple(
        call
        if isinstance(call, ToolCall)
        else ToolCall(id=fresh_call_id(), name=call[0], arguments=call[1])
        for call in calls
    )
    return CompletionResponse(
        content=content,
        model=model,
        usage=usage or Usage(),
        finish_reason="tool_calls",
        provider="scripted",
        tool_calls=built,
    )


class ScriptedProvider:
    """Answers from a queue and records every request; thread-safe."""

    provider_name = "scripted"

    def __init__(self, script: Iterable[ScriptEntry] = (), *, delay: float = 0.0) -> None:
        self._script: deque[ScriptEntry] = deque(script)
        self._lock = threading.Lock()
        self.delay = delay
        """Seconds to wait before each answer (to simulate a slow model)."""
        self.requests: list[ScriptedRequest] = []
        """Every request received, in order."""

    def add(self, *entries: ScriptEntry) -> None:
        """Append entries to the script."""
        with self._lock:
            self._script.extend(entries)

    @property
    def remaining(self) -> int:
        """How many scripted entries are left."""
        return len(self._script)

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> Iterator[StreamEvent]:
        """The answer of :meth:`complete` as a stream."""
        return deltas_of(self.complete(messages, tools=tools, options=options))

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> CompletionResponse:
        """Record the request and play the next entry of the script."""
        with self._lock:
            self.requests.append(ScriptedRequest(tuple(messages), tuple(tools), options))
            if not self._script:
                raise ScriptExhausted(
                    f"the scripted provider was asked {len(self.requests)} times, "
                    f"but only {len(self.requests) - 1} answers were scripted"
                )
            entry = self._script.popleft()
        if self.delay:
            time.sleep(self.delay)
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, CompletionResponse):
            return entry
        return entry(messages, tools, options)
