"""Provider test helpers: an ``httpx.Client`` on a ``MockTransport`` that records requests.

Nothing is patched: the client is handed to the adapter as ``http_client``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

Reply = httpx.Response | BaseException | Callable[[httpx.Request], httpx.Response]


def mock_client(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.Client:
    """A client whose every request goes to ``handler``."""
    return httpx.Client(transport=httpx.MockTransport(handler))


class Recorder:
    """A scripted handler: answers with ``replies`` in order (the last one repeats).

    A reply is a response, an exception to raise, or a function of the request.
    Every request is kept in ``requests``; ``bodies`` are their decoded JSON.
    """

    def __init__(self, *replies: Reply) -> None:
        if not replies:
            raise ValueError("a Recorder needs at least one reply")
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.client = mock_client(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
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


@pytest.fixture
def mock_http() -> Iterator[Callable[..., Recorder]]:
    """``mock_http(*replies)`` -> a :class:`Recorder`; its client is closed afterwards."""
    made: list[Recorder] = []

    def make(*replies: Reply) -> Recorder:
        made.append(Recorder(*replies))
        return made[-1]

    yield make
    for recorder in made:
        recorder.client.close()


@pytest.fixture
def sleeps() -> list[float]:
    """Pass ``sleep=sleeps.append`` so retries record their delay instead of waiting."""
    return []
