"""A provider adapter wired to a strict, scripted ``httpx.MockTransport``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from conversations.providers.base import HTTPProvider

Outcome = httpx.Response | Callable[[httpx.Request], httpx.Response]
P = TypeVar("P", bound=HTTPProvider)


def provider_with_replies(
    provider_class: type[P], *outcomes: Outcome, **kwargs: Any
) -> tuple[P, list[httpx.Request], list[float]]:
    """An adapter whose client answers with ``outcomes`` in turn (one each, no more).

    Returns the adapter, the requests it sent and the delays it would have
    slept between retries (recorded instead of waited).
    """
    queue = list(outcomes)
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        outcome = queue.pop(0)
        return outcome(request) if callable(outcome) else outcome

    sleeps: list[float] = []
    client = httpx.Client(transport=httpx.MockTransport(handler))
    provider = provider_class(http_client=client, sleep=sleeps.append, **kwargs)
    return provider, requests, sleeps


def timeout(request: httpx.Request) -> httpx.Response:
    """An outcome that times out."""
    raise httpx.ReadTimeout("timed out", request=request)
