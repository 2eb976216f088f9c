"""The one HTTP helper of the provider tests: a ``MockTransport`` that answers and records.

Nothing is patched: an adapter gets the recorder's ``client`` as ``http_client``.
A :class:`Recorder` answers either leniently (its last reply repeats, for tests
that only care about the first exchanges) or strictly (one reply per request;
one request more fails the test), and keeps every request it saw.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import httpx

from conversations.providers.base import HTTPProvider

# A reply is a response, an exception to raise, or a function of the request.
Reply = httpx.Response | BaseException | Callable[[httpx.Request], httpx.Response]
P = TypeVar("P", bound=HTTPProvider)


class Recorder:
    """A scripted ``MockTransport`` handler with the ``httpx.Client`` that uses it.

    Answers with ``replies`` in order. With ``strict=False`` the last reply
    repeats for every further request; with ``strict=True`` each reply answers
    one request and one request more is an assertion error. Every request is
    kept in ``requests``; ``bodies`` are their decoded JSON.
    """

    def __init__(self, *replies: Reply, strict: bool = False) -> None:
        if not replies:
            raise ValueError("a Recorder needs at least one reply")
        self.replies = list(replies)
        self.strict = strict
        self.requests: list[httpx.Request] = []
        self.client = httpx.Client(transport=httpx.MockTransport(self))

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.strict and len(self.requests) > len(self.replies):
            raise AssertionError(
                f"request {len(self.requests)} ({request.method} {request.url}) was not "
                f"expected: only {len(self.replies)} replies were scripted"
            )
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, httpx.Response):
            # A fresh copy per request: a response object belongs to one exchange.
            return httpx.Response(reply.status_code, headers=reply.headers, content=reply.content)
        return reply(request)

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.requests]


def provider_with_replies(
    provider_class: type[P], *replies: Reply, **kwargs: Any
) -> tuple[P, list[httpx.Request], list[float]]:
    """An adapter whose client answers with ``replies`` in turn (one each, no more).

    Returns the adapter, the requests it sent and the delays it would have
    slept between retries (recorded instead of waited).
    """
    recorder = Recorder(*replies, strict=True)
    sleeps: list[float] = []
    provider = provider_class(http_client=recorder.client, sleep=sleeps.append, **kwargs)
    return provider, recorder.requests, sleeps


def timeout(request: httpx.Request) -> httpx.Response:
    """A reply that times out."""
    raise httpx.ReadTimeout("timed out", request=request)


class ChunkStream(httpx.SyncByteStream):
    """A response body sent in the given byte chunks, optionally breaking off with ``fail``.

    ``closed`` tells whether the client closed the response; ``sent`` counts
    the chunks handed out.
    """

    def __init__(self, chunks: Iterable[bytes], *, fail: BaseException | None = None) -> None:
        self.chunks = list(chunks)
        self.fail = fail
        self.closed = False
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.sent += 1
            yield chunk
        if self.fail is not None:
            raise self.fail

    def close(self) -> None:
        self.closed = True


def streamed(
    chunks: Iterable[bytes],
    *,
    status: int = 200,
    fail: BaseException | None = None,
    headers: dict[str, str] | None = None,
    streams: list[ChunkStream] | None = None,
) -> Callable[[httpx.Request], httpx.Response]:
    """A reply streaming ``chunks`` (a fresh body per request); each body is kept in ``streams``."""
    parts = list(chunks)

    def reply(request: httpx.Request) -> httpx.Response:
        body = ChunkStream(parts, fail=fail)
        if streams is not None:
            streams.append(body)
        return httpx.Response(status, headers=headers, stream=body, request=request)

    return reply


def cut(data: bytes, points: Iterable[int]) -> list[bytes]:
    """``data`` cut at ``points`` (any integers, taken modulo its length; empty chunks kept)."""
    size = max(len(data), 1)
    marks = sorted(point % (size + 1) for point in points)
    edges = [0, *marks, len(data)]
    return [data[start:end] for start, end in itertools.pairwise(edges)]
