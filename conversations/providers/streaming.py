"""Streaming answers: the transport shared by the HTTP adapters, and streams for everyone else.

An HTTP adapter streams by naming its wire format (``stream_format``: ``"sse"``
or ``"ndjson"``), building its streaming request body and handing each
decoded record to a :class:`StreamParser` of its own. :func:`stream_http`
does the rest for all of them: it reads the body in byte chunks cut anywhere
(UTF-8 and line breaks are reassembled here), bounds its size, maps failures
to the provider error tree, and retries, like a whole request, only while
nothing has been yielded yet: a stream that breaks off, sends a malformed
record or ends without its terminal event raises
:class:`~conversations.exceptions.ProviderResponseError` once something has
been shown, because the caller cannot take back what it already relayed.
A stream is also held to an idle and a total time bound (see
:mod:`~conversations.providers.stream_deadline`), and a vendor that answers a
request for a stream with one JSON body is understood as a whole answer.

A parser is easiest to get right by accumulating the stream into the body the
vendor would have sent whole and handing that to the adapter's
``parse_response``: then a streamed answer and a whole one cannot differ.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import httpx

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from conversations.exceptions import (
    ProviderConnectionError,
    ProviderInvalidResponse,
    ProviderResponseError,
    ProviderTimeout,
)

from .boundary import check_response
from .options import CompletionOptions
from .stream_deadline import StreamDeadline

__all__ = [
    "Delta",
    "PartialTurn",
    "StreamParser",
    "deltas_of",
    "iter_lines",
    "ndjson_records",
    "sse_records",
    "stream_completion",
    "stream_http",
]

Delta = TextDelta | ReasoningDelta | ToolCallDelta
"""A stream event that is not the final response."""

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_UNDERSTOOD = (KeyError, TypeError, ValueError, IndexError, RecursionError, AttributeError)


class StreamParser(Protocol):
    """Turns the records of one streamed answer into deltas, then into the response."""

    def feed(self, event: str, data: str) -> Iterable[Delta]:
        """The deltas of one record (SSE: its event name and data; NDJSON: ``""`` and the line).

        May raise ``KeyError``/``TypeError``/``ValueError`` on a malformed record
        (reported as a bad response) or a provider error for an error record.
        """
        ...

    def finish(self) -> CompletionResponse:
        """The whole answer; raise :class:`ProviderResponseError` when the stream is incomplete."""
        ...

    # Optional: ``progress() -> object``, a value that changes when a record said
    # something without a delta (a finish, usage). Such a record restarts the idle
    # bound like a delta; one that changes nothing (a ping) does not.


class _StreamingAdapter(Protocol):
    """What :func:`stream_http` uses of :class:`~conversations.providers.base.HTTPProvider`."""

    @property
    def provider_name(self) -> str: ...

    timeout: float
    max_retries: int
    max_response_bytes: int
    max_stream_seconds: float

    @property
    def client(self) -> httpx.Client: ...

    def _headers(self) -> dict[str, str]: ...

    def _refuse(
        self,
        status: int,
        headers: httpx.Headers,
        data: bytes,
        *,
        attempt: int,
        last: bool,
        deadline: float,
    ) -> None: ...

    def _wait(
        self, attempt: int, retry_after: float | None, reason: str, deadline: float
    ) -> bool: ...


# Decoding ------------------------------------------------------------------------


def iter_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a UTF-8 byte stream cut at arbitrary points (``\\r\\n``, ``\\r`` or ``\\n``).

    Raises ``UnicodeDecodeError`` (a ``ValueError``) on bytes that are not UTF-8.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    buffer = ""
    for chunk in chunks:
        buffer += decoder.decode(chunk)
        # A trailing "\r" may be the first half of "\r\n": keep it for the next chunk.
        held = buffer.endswith("\r")
        parts = _LINE_BREAK.split(buffer[:-1] if held else buffer)
        buffer = parts.pop() + ("\r" if held else "")
        yield from parts
    buffer += decoder.decode(b"", final=True)
    if buffer.endswith("\r"):
        buffer = buffer[:-1]
    if buffer:
        yield from _LINE_BREAK.split(buffer)


def sse_records(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """``(event, data)`` of each Server-Sent Event; ``event`` defaults to ``"message"``.

    Comment lines are skipped and several ``data:`` lines are joined with
    ``"\\n"``, as the SSE format says; an event not closed by a blank line at
    the very end is still delivered.
    """
    event, data = "", list[str]()
    for line in lines:
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", list[str]()
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield event or "message", "\n".join(data)


def ndjson_records(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """``("", line)`` for each non-blank line of newline-delimited JSON."""
    for line in lines:
        if line.strip():
            yield "", line


# The transport --------------------------------------------------------------------


def stream_http(
    provider: _StreamingAdapter,
    *,
    url: str,
    payload: Mapping[str, Any],
    parser: Callable[[], StreamParser],
    wire: Literal["sse", "ndjson"],
    whole: Callable[[Mapping[str, Any]], CompletionResponse] | None = None,
) -> Iterator[StreamEvent]:
    """POST ``payload`` and yield the deltas ``parser()`` finds, then the checked response.

    The stream is held to two bounds (see :mod:`.stream_deadline`): nothing
    meaningful for ``provider.timeout`` seconds, or ``provider.max_stream_seconds``
    in all, ends it with :class:`ProviderTimeout`. Retries and waits happen
    only before the first delta and within the exchange's deadline, as for a
    whole answer. A vendor that answers with one JSON body instead of a stream
    is understood through ``whole`` (the adapter's ``parse_response``), the
    answer relayed as one piece. Closing the iterator closes the connection.
    """
    name = provider.provider_name
    records = sse_records if wire == "sse" else ndjson_records
    attempts = provider.max_retries + 1
    with StreamDeadline(
        name=name,
        idle_seconds=provider.timeout,
        total_seconds=provider.max_stream_seconds,
    ) as bounds:
        deadline = bounds.first_deadline
        for attempt in range(attempts):
            last = attempt == attempts - 1
            current = parser()
            yielded = False
            started = False
            try:
                bounds.check()
                with provider.client.stream(
                    "POST", url, json=payload, headers=provider._headers(), timeout=provider.timeout
                ) as response:
                    bounds.watch(response)
                    body = _bounded(response.iter_bytes(), provider, bounds)
                    if not 200 <= response.status_code < 300:
                        data = b"".join(body)
                        provider._refuse(
                            response.status_code,
                            response.headers,
                            data,
                            attempt=attempt,
                            last=last,
                            deadline=deadline,
                        )
                        continue
                    started = True
                    if whole is not None and _is_json(response):
                        answer = _whole_answer(b"".join(body), current, whole, name)
                        yield from deltas_of(check_response(answer, provider=name))
                        return
                    for event, data_text in records(iter_lines(body)):
                        before = _progress(current)
                        for delta in current.feed(event, data_text):
                            yielded = True
                            bounds.progressed()
                            yield delta
                        if _progress(current) != before:
                            bounds.progressed()
                    final = current.finish()
            except ProviderInvalidResponse:
                raise
            except (httpx.TransportError, ProviderResponseError, *_UNDERSTOOD) as exc:
                if bounds.passed is not None:
                    # Cut by a bound (the watchdog's shutdown shows as a broken read).
                    raise bounds.error() from None
                failure = _failure(name, exc, started=started, timeout=provider.timeout)
                if (
                    yielded
                    or last
                    or not provider._wait(attempt, None, type(exc).__name__, deadline)
                ):
                    raise failure from None
                continue
            finally:
                bounds.unwatch()
            yield check_response(final, provider=name)
            return
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


def _progress(parser: StreamParser) -> object:
    """What the parser knows of the answer's end (finish, usage), where it says."""
    progress = getattr(parser, "progress", None)
    return progress() if callable(progress) else None


def _is_json(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip().lower() == "application/json"


def _whole_answer(
    data: bytes,
    parser: StreamParser,
    whole: Callable[[Mapping[str, Any]], CompletionResponse],
    name: str,
) -> CompletionResponse:
    """The answer of a vendor that sent one JSON body to a request for a stream.

    An object is the whole answer; an array (Gemini's stream without SSE
    framing) holds the stream's chunks, each handed to the stream parser.
    """
    try:
        body = json.loads(data)
        if isinstance(body, list):
            for chunk in body:
                # Its deltas are not relayed one by one: the answer goes out as one piece.
                for _delta in parser.feed("message", json.dumps(chunk)):
                    pass
            return parser.finish()
        if not isinstance(body, dict):
            raise TypeError(f"expected a JSON object, got {type(body).__name__}")
        return whole(body)
    except ProviderResponseError:
        raise
    except _UNDERSTOOD as exc:
        raise ProviderResponseError(
            f"{name}: could not understand the whole answer sent to a request for a stream "
            f"({type(exc).__name__})"
        ) from None


def _bounded(
    chunks: Iterator[bytes], provider: _StreamingAdapter, bounds: StreamDeadline
) -> Iterator[bytes]:
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > provider.max_response_bytes:
            raise ProviderInvalidResponse(
                f"{provider.provider_name}: the answer is larger than "
                f"{provider.max_response_bytes} bytes"
            )
        # Every chunk, meaningful or not: a drip of comments is cut on time too.
        bounds.check()
        yield chunk


def _failure(name: str, exc: BaseException, *, started: bool, timeout: float) -> Exception:
    """The provider error a failed streaming attempt is reported as."""
    if isinstance(exc, ProviderResponseError):
        return exc
    if isinstance(exc, httpx.TransportError):
        if started:
            return ProviderResponseError(f"{name}: the stream broke off ({type(exc).__name__})")
        if isinstance(exc, httpx.TimeoutException):
            return ProviderTimeout(f"{name}: no answer within {timeout:g} s")
        return ProviderConnectionError(f"{name}: connection failed ({type(exc).__name__})")
    return ProviderResponseError(f"{name}: could not understand the stream ({type(exc).__name__})")


# Streams for providers that answer whole ------------------------------------------


def deltas_of(response: CompletionResponse) -> Iterator[StreamEvent]:
    """A stream for an answer that arrived whole: its reasoning, text and calls, then itself."""
    if response.thinking:
        yield ReasoningDelta(response.thinking)
    if response.content:
        yield TextDelta(response.content)
    for index, call in enumerate(response.tool_calls or ()):
        yield ToolCallDelta(index, call.id, call.name, call.arguments_json)
    yield response


def stream_completion(
    provider: Any,
    messages: Sequence[ChatMessage],
    *,
    tools: Sequence[ToolSpec] = (),
    options: CompletionOptions,
) -> Iterator[StreamEvent]:
    """``provider.stream(...)``, or the whole answer as a stream when it cannot stream."""
    stream = getattr(provider, "stream", None)
    if callable(stream):
        return iter(stream(messages, tools=tools, options=options))
    return deltas_of(provider.complete(messages, tools=tools, options=options))


@dataclass
class PartialTurn:
    """What a stream has shown so far: the text, the reasoning and each call's pieces."""

    text: str = ""
    reasoning: str = ""
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    """By index: ``{"id": ..., "name": ..., "arguments": ...}`` (id and name ``""`` until known)."""

    def add(self, delta: Delta) -> None:
        """Fold one delta in."""
        if isinstance(delta, TextDelta):
            self.text += delta.text
        elif isinstance(delta, ReasoningDelta):
            self.reasoning += delta.text
        else:
            call = self.calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                call["id"] = delta.id
            if delta.name:
                call["name"] = delta.name
            call["arguments"] += delta.arguments

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready snapshot (calls in index order)."""
        return {
            "text": self.text,
            "reasoning": self.reasoning,
            "tool_calls": [{"index": i, **self.calls[i]} for i in sorted(self.calls)],
        }
