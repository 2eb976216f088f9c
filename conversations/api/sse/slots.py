"""How many event streams one user may hold open at once, across every process.

Each open stream takes one of ``CONVERSATIONS["MAX_STREAMS_PER_USER"]``
slots, a key in Django's cache taken with ``cache.add`` (atomic in every
backend Django ships, and across processes with a shared cache such as
Redis or Memcached). A slot is given back when its stream ends; a slot whose
process died expires on its own shortly after the longest a stream may last.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from django.core.cache import cache
from django.db import connections

from conversations.conf import app_settings

__all__ = [
    "acquire_stream_slot",
    "release_connections",
    "release_stream_slot",
    "releasing",
    "releasing_async",
]


def _key(user_id: Any, slot: int) -> str:
    return f"conversations:stream-slot:{user_id}:{slot}"


def acquire_stream_slot(*, user_id: Any, lifetime: float) -> str | None:
    """A free slot's key for ``user_id`` (now taken), or ``None`` when all are taken."""
    for slot in range(app_settings().MAX_STREAMS_PER_USER):
        key = _key(user_id, slot)
        if cache.add(key, 1, timeout=int(lifetime) + 60):
            return key
    return None


def release_stream_slot(key: str) -> None:
    """Give a slot back."""
    cache.delete(key)


def releasing(content: Iterator[bytes], key: str) -> Iterator[bytes]:
    """``content``, giving the slot back when the stream ends or the client goes."""
    try:
        yield from content
    finally:
        release_stream_slot(key)


async def releasing_async(content: AsyncIterator[bytes], key: str) -> AsyncIterator[bytes]:
    """The same for an asynchronous stream."""
    try:
        async for chunk in content:
            yield chunk
    finally:
        await cache.adelete(key)


def release_connections() -> None:
    """Close this thread's database connections while a stream waits between polls.

    A WSGI stream runs in its request's thread; holding the connection there
    for minutes would let one user take as many connections as streams.
    Not inside a transaction (a test's, or a host's ``ATOMIC_REQUESTS``):
    closing would break it.
    """
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()
