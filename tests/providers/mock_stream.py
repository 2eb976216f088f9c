"""Streamed replies for the ``Recorder`` of :mod:`tests.providers.mock_http`.

A streamed reply answers 200 and delivers its body in the byte chunks given,
cut wherever the test cut them; a broken one raises a transport error after
its chunks, as a connection that drops mid-answer does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import httpx

from conversations.providers.streaming import PartialTurn

__all__ = ["broken_stream", "collect", "shown", "sse_event", "streamed"]


def sse_event(name: str, data: str, newline: str = "\n") -> str:
    """One Server-Sent Event with its blank line."""
    return f"event: {name}{newline}data: {data}{newline}{newline}"


def streamed(
    chunks: Sequence[bytes], *, content_type: str = "text/event-stream"
) -> Callable[[httpx.Request], httpx.Response]:
    """A reply streaming ``chunks`` (fresh for every request it answers)."""

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": content_type}, content=iter(chunks))

    return reply


def broken_stream(chunks: Sequence[bytes]) -> Callable[[httpx.Request], httpx.Response]:
    """A reply streaming ``chunks``, then failing with ``httpx.ReadError``."""

    def body(request: httpx.Request) -> Iterator[bytes]:
        yield from chunks
        raise httpx.ReadError("connection reset", request=request)

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=body(request)
        )

    return reply


def collect(stream: Iterable[Any]) -> list[Any]:
    """The items of ``stream``, then the exception that ended it, if any (as the last item)."""
    items: list[Any] = []
    try:
        for item in stream:
            items.append(item)
    except Exception as exc:  # the tests look at what came before it too
        items.append(exc)
    return items


def shown(items: list[Any]) -> PartialTurn:
    """What the deltas among ``items`` (all but the last) add up to."""
    turn = PartialTurn()
    for item in items[:-1]:
        turn.add(item)
    return turn
