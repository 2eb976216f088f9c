"""What every transport of live events shares: the event, the subscription, the local fan-out.

A transport hands each event it receives to :class:`Hub`, which keeps this
process's subscriptions by run and delivers to each of them. The in-process
transport (:class:`LocalBackend`) is a hub and nothing more.

On the wire (Redis, PostgreSQL) an event is one JSON object,
``{"r": run id, "t": type, "d": data}`` (:func:`encode` / :func:`decode`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "AGENT_PREFIX",
    "CHANGED",
    "DELTA_TYPES",
    "Backend",
    "Hub",
    "LiveEvent",
    "LocalBackend",
    "Subscription",
    "decode",
    "encode",
]

AGENT_PREFIX = "agent."
"""Events of an agent's run relayed to the runs above it (``agent.text.delta`` ...)."""

CHANGED = "changed"
"""The event type saying the run's stored rows changed."""
DELTA_TYPES = frozenset({"text.delta", "reasoning.delta", "tool_call.delta"})
"""The event types of a streaming answer."""


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """One published event of a run."""

    run_id: str
    type: str
    data: dict[str, Any] = field(default_factory=dict)


def encode(event: LiveEvent) -> str:
    """``event`` as one line of JSON (what the network transports carry)."""
    body = {"r": event.run_id, "t": event.type, "d": event.data}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def decode(payload: str | bytes) -> LiveEvent | None:
    """The event ``payload`` carries, or ``None`` when it is not one of ours."""
    try:
        body = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    run_id, kind, data = body.get("r"), body.get("t"), body.get("d")
    if not (isinstance(run_id, str) and isinstance(kind, str) and isinstance(data, dict)):
        return None
    return LiveEvent(run_id, kind, data)


class Subscription:
    """The events of one run, as they are published, until closed; thread-safe.

    A subscription is *ready* once its transport delivers the run's events
    (at once in-process; once the listener's ``SUBSCRIBE`` or ``LISTEN`` took
    effect on the network transports): what is published after that reaches it.
    """

    def __init__(
        self, run_id: str, on_close: Callable[[Subscription], None], *, ready: bool = True
    ) -> None:
        self.run_id = run_id
        self._on_close = on_close
        self._items: deque[LiveEvent] = deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waker: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._ready = ready
        self.closed = False

    @property
    def ready(self) -> bool:
        return self._ready

    def deliver(self, event: LiveEvent) -> None:
        """Queue ``event`` (backends call this, from any thread)."""
        with self._lock:
            if self.closed:
                return
            self._items.append(event)
            self._wake()

    def mark_ready(self) -> None:
        """The transport now delivers this run's events (backends call this)."""
        with self._lock:
            if not self._ready:
                self._ready = True
                self._wake()

    def _wake(self) -> None:
        # Called with the lock held.
        self._changed.notify_all()
        if self._waker is not None:
            loop, flag = self._waker
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
                self._changed.wait(remaining)
            return self._items.popleft()

    async def aget(self, timeout: float) -> LiveEvent | None:
        """:meth:`get` for asyncio: waits on the event loop, holding no thread."""
        with self._lock:
            if self._items:
                return self._items.popleft()
        await self._await(lambda: bool(self._items) or self.closed, timeout)
        with self._lock:
            return self._items.popleft() if self._items else None

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the subscription is ready, up to ``timeout`` seconds; whether it is."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not (self._ready or self.closed):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            return self._ready

    async def aready(self, timeout: float) -> bool:
        """:meth:`wait_ready` for asyncio, holding no thread."""
        await self._await(lambda: self._ready or self.closed, timeout)
        return self._ready

    async def _await(self, done: Callable[[], bool], timeout: float) -> None:
        """Wait on the event loop until ``done()`` (checked under the lock) or ``timeout``."""
        deadline = time.monotonic() + timeout
        flag = asyncio.Event()
        loop = asyncio.get_running_loop()
        try:
            while True:
                with self._lock:
                    if done():
                        return
                    flag.clear()
                    self._waker = (loop, flag)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(flag.wait(), remaining)
        finally:
            with self._lock:
                self._waker = None

    def close(self) -> None:
        """Stop receiving; idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._wake()
        self._on_close(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Backend(Protocol):
    """A transport of events."""

    spans_processes: bool
    """Whether an event published in one process reaches the subscribers of every other."""

    def publish(self, event: LiveEvent) -> None: ...

    def subscribe(self, run_id: str) -> Subscription: ...

    def close(self) -> None: ...


class Hub:
    """This process's subscriptions, by run; hands each event to those of its run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: dict[str, set[Subscription]] = {}

    def add(self, subscription: Subscription) -> bool:
        """Register ``subscription``; whether it is its run's first."""
        with self._lock:
            existing = self._subscriptions.setdefault(subscription.run_id, set())
            existing.add(subscription)
            return len(existing) == 1

    def discard(self, subscription: Subscription) -> bool:
        """Forget ``subscription``; whether its run has none left."""
        with self._lock:
            existing = self._subscriptions.get(subscription.run_id)
            if existing is None:
                return False
            existing.discard(subscription)
            if existing:
                return False
            del self._subscriptions[subscription.run_id]
            return True

    def runs(self) -> set[str]:
        """The runs someone in this process is subscribed to."""
        with self._lock:
            return set(self._subscriptions)

    def of(self, run_id: str) -> list[Subscription]:
        with self._lock:
            return list(self._subscriptions.get(run_id, ()))

    def deliver(self, event: LiveEvent) -> None:
        """Hand ``event`` to this process's subscriptions of its run."""
        for subscription in self.of(event.run_id):
            subscription.deliver(event)

    def mark_ready(self, run_id: str) -> None:
        for subscription in self.of(run_id):
            subscription.mark_ready()


class LocalBackend:
    """Delivers to the subscriptions of this process only."""

    spans_processes = False

    def __init__(self) -> None:
        self.hub = Hub()

    def publish(self, event: LiveEvent) -> None:
        self.hub.deliver(event)

    def subscribe(self, run_id: str) -> Subscription:
        subscription = Subscription(run_id, self._forget)
        self.hub.add(subscription)
        return subscription

    def _forget(self, subscription: Subscription) -> None:
        self.hub.discard(subscription)

    def close(self) -> None:
        """Nothing to release."""
