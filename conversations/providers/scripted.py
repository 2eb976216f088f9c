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
answering), a callable ``(messages, tools, options) -> CompletionResponse`` or
a :class:`ScriptedStream` (:func:`scripted_stream`): the exact deltas
:meth:`ScriptedProvider.stream` yields before the response (``complete()``
just answers its response). Any other entry streams as
:func:`~conversations.providers.streaming.deltas_of` makes it. Asking more
often than the script allows raises :class:`ScriptExhausted`.
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
    InvalidArgumentError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)

from .base import CompletionOptions, fresh_call_id
from .streaming import Delta, deltas_of

__all__ = [
    "ScriptExhausted",
    "ScriptedProvider",
    "ScriptedRequest",
    "ScriptedStream",
    "scripted_calls",
    "scripted_stream",
    "scripted_text",
]

Responder = Callable[
    [Sequence[ChatMessage], Sequence[ToolSpec], CompletionOptions], CompletionResponse
]


@dataclass(frozen=True, slots=True)
class ScriptedStream:
    """A scripted answer with the deltas its stream shows first (see :func:`scripted_stream`)."""

    deltas: tuple[Delta, ...]
    response: CompletionResponse


def scripted_stream(*events: StreamEvent) -> ScriptedStream:
    """An entry streamed exactly as given: deltas, then the one response, last.

    ``complete()`` answers with the response alone. The deltas are played as
    they are: they need not add up to the response (a test of what a caller
    shows and what it stores may want them not to).
    """
    final = events[-1] if events else None
    if not isinstance(final, CompletionResponse):
        raise InvalidArgumentError(
            "a scripted stream ends with its CompletionResponse",
            code="invalid_scripted_stream",
            field="events",
        )
    deltas: list[Delta] = []
    for position, event in enumerate(events[:-1]):
        if isinstance(event, CompletionResponse):
            raise InvalidArgumentError(
                f"a scripted stream has exactly one CompletionResponse, last; "
                f"event {position} is another",
                code="invalid_scripted_stream",
                field=f"events/{position}",
            )
        if not isinstance(event, TextDelta | ReasoningDelta | ToolCallDelta):
            raise InvalidArgumentError(
                f"event {position} of a scripted stream is not a delta: {type(event).__name__}",
                code="invalid_scripted_stream",
                field=f"events/{position}",
            )
        deltas.append(event)
    return ScriptedStream(deltas=tuple(deltas), response=final)


ScriptEntry = CompletionResponse | BaseException | Responder | ScriptedStream


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
        """Record the request and play the next entry as a stream.

        The request is taken (and a scripted exception raised) here, before
        anything is yielded.
        """
        entry = self._next(messages, tools, options)
        if isinstance(entry, ScriptedStream):
            return iter((*entry.deltas, entry.response))
        return deltas_of(self._answer(entry, messages, tools, options))

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> CompletionResponse:
        """Record the request and play the next entry of the script."""
        entry = self._next(messages, tools, options)
        if isinstance(entry, ScriptedStream):
            return entry.response
        return self._answer(entry, messages, tools, options)

    def _next(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> ScriptEntry:
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
        return entry

    @staticmethod
    def _answer(
        entry: ScriptEntry,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> CompletionResponse:
        if isinstance(entry, CompletionResponse):
            return entry
        assert callable(entry)
        return entry(messages, tools, options)
