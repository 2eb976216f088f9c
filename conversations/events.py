"""Live events of runs: one publish/subscribe seam between the loop and whoever watches.

The tool loop publishes two kinds of events for a run:

- deltas while a model answer streams in (``text.delta``, ``reasoning.delta``,
  ``tool_call.delta``), never stored as rows; each carries ``seq``, a number
  that grows by one per delta of the run;
- ``changed`` after each commit that added or changed the run's rows, so a
  watcher reads the persisted events (``conversations.api.events``) at once
  instead of polling for them.

Watchers :func:`subscribe` to one run and read events with ``get`` (threads)
or ``aget`` (asyncio, without holding a thread). Delivery is best effort and
live only: an event published while nobody listens is gone. What a late or
reconnecting watcher needs is kept elsewhere: the rows for persisted events,
and :func:`inflight` for the answer still streaming (the loop keeps its text
so far in Django's cache until the message is stored).

The transport is chosen by ``CONVERSATIONS["EVENTS_URL"]``: empty for
in-process delivery (one process, as under ``make run``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from django.core.cache import cache

__all__ = [
    "CHANGED",
    "DELTA_TYPES",
    "INFLIGHT_SECONDS",
    "LiveEvent",
    "Subscription",
    "clear_inflight",
    "inflight",
    "publish",
    "set_inflight",
    "subscribe",
]

CHANGED = "changed"
"""The event type saying the run's stored rows changed."""
DELTA_TYPES = frozenset({"text.delta", "reasoning.delta", "tool_call.delta"})
"""The event types of a streaming answer."""
INFLIGHT_SECONDS = 3600
"""How long an in-flight snapshot outlives its last update in the cache (a crashed run's)."""


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """One published event of a run."""

    run_id: str
    type: str
    data: dict[str, Any] = field(default_factory=dict)


class Subscription:
    """The events of one run, as they are published, until closed; thread-safe."""

    def __init__(self, run_id: str, on_close: Callable[[Subscription], None]) -> None:
        self.run_id = run_id
        self._on_close = on_close
        self._items: deque[LiveEvent] = deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._waker: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self.closed = False

    def deliver(self, event: LiveEvent) -> None:
        """Queue ``event`` (backends call this, from any thread)."""
        with self._lock:
            if self.closed:
                return
            self._items.append(event)
            self._ready.notify_all()
            waker = self._waker
        if waker is not None:
            loop, flag = waker
            # RuntimeError: the watcher's event loop has closed meanwhile.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(flag.set)

    def get(self, timeout: float) -> LiveEvent | None:
        """The next event, waiting up to ``timeout`` seconds (``None`` when none came)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._items:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    return None
                self._ready.wait(remaining)
            return self._items.popleft()

    async def aget(self, timeout: float) -> LiveEvent | None:
        """:meth:`get` for asyncio: waits on the event loop, holding no thread."""
        flag = asyncio.Event()
        with self._lock:
            if self._items:
                return self._items.popleft()
            self._waker = (asyncio.get_running_loop(), flag)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(flag.wait(), timeout)
        with self._lock:
            self._waker = None
            return self._items.popleft() if self._items else None

    def close(self) -> None:
        """Stop receiving; idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._ready.notify_all()
        self._on_close(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Backend(Protocol):
    """A transport of events."""

    def publish(self, event: LiveEvent) -> None: ...

    def subscribe(self, run_id: str) -> Subscription: ...


class LocalBackend:
    """Delivers to the subscriptions of this process only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: dict[str, set[Subscription]] = {}

    def publish(self, event: LiveEvent) -> None:
        self.deliver(event)

    def deliver(self, event: LiveEvent) -> None:
        """Hand ``event`` to this process's subscriptions of its run."""
        with self._lock:
            targets = list(self._subscriptions.get(event.run_id, ()))
        for subscription in targets:
            subscription.deliver(event)

    def subscribe(self, run_id: str) -> Subscription:
        subscription = Subscription(run_id, self._forget)
        with self._lock:
            self._subscriptions.setdefault(run_id, set()).add(subscription)
        return subscription

    def _forget(self, subscription: Subscription) -> None:
        with self._lock:
            subscriptions = self._subscriptions.get(subscription.run_id)
            if subscriptions is not None:
                subscriptions.discard(subscription)
                if not subscriptions:
                    del self._subscriptions[subscription.run_id]


_local = LocalBackend()


def backend() -> Backend:
    """The transport ``CONVERSATIONS["EVENTS_URL"]`` names."""
    return _local


def publish(run_id: UUID | str, type: str, data: dict[str, Any] | None = None) -> None:
    """Publish one event of run ``run_id`` to every watcher."""
    backend().publish(LiveEvent(str(run_id), type, dict(data or {})))


def subscribe(run_id: UUID | str) -> Subscription:
    """Start receiving the events of run ``run_id`` (close the subscription when done)."""
    return backend().subscribe(str(run_id))


# The answer still streaming ----------------------------------------------------------


def _inflight_key(run_id: UUID | str) -> str:
    return f"conversations:inflight:{run_id}"


def set_inflight(run_id: UUID | str, snapshot: dict[str, Any]) -> None:
    """Keep what run ``run_id``'s streaming answer has shown so far (with its last ``seq``)."""
    cache.set(_inflight_key(run_id), snapshot, INFLIGHT_SECONDS)


def inflight(run_id: UUID | str) -> dict[str, Any] | None:
    """The snapshot of run ``run_id``'s streaming answer, or ``None`` when none is streaming."""
    value = cache.get(_inflight_key(run_id))
    return value if isinstance(value, dict) else None


def clear_inflight(run_id: UUID | str) -> None:
    """Forget the snapshot (its message is stored, or the answer failed)."""
    cache.delete(_inflight_key(run_id))
