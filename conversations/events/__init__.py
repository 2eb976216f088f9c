"""Live events of runs: one publish/subscribe seam between the loop and whoever watches.

The tool loop publishes two kinds of events for a run:

- deltas while a model answer streams in (``text.delta``, ``reasoning.delta``,
  ``tool_call.delta``), never stored as rows; each carries ``seq``, a number
  that grows by one per delta of the run;
- ``changed`` after each commit that added or changed the run's rows, so a
  watcher reads the persisted events (``conversations.api.sse.views``) at once
  instead of polling for them;
- for a run an agent call started, the same events again on each run above
  it, as ``agent.text.delta``, ``agent.changed`` ... with the agent's run id
  (``run``), framed by ``agent.started`` and ``agent.finished``.

Watchers :func:`subscribe` (or, in asyncio code, :func:`asubscribe`) to one
run and read events with ``get`` (threads) or ``aget`` (asyncio, without
holding a thread). Both return once the subscription is ready: whatever is
published afterwards reaches it. Delivery is best effort and live only: an
event published while nobody listens is gone. What a late or reconnecting
watcher needs is kept elsewhere: the rows for persisted events, and
:func:`inflight` for the answer still streaming (the loop keeps its text so
far in Django's cache until just before the message is stored), and
:func:`streamed_seq` for the last ``seq`` of the answers that ended streaming
(a delta at or below it belongs to a turn that is stored, or about to be).
:func:`publish` never raises: an event that cannot be sent is logged and dropped.

The transport is chosen by ``CONVERSATIONS["EVENTS_URL"]``:

- empty (the default): in-process delivery (one process, as under ``make run``);
- ``redis://...``: Redis publish/subscribe (:mod:`conversations.events.redis_backend`);
- ``postgres``: PostgreSQL ``LISTEN``/``NOTIFY`` on the default database
  (:mod:`conversations.events.postgres_backend`).

Each process makes one transport (again after a fork) and keeps it.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any
from uuid import UUID

from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.core.signals import setting_changed
from django.dispatch import receiver

from conversations.conf import app_settings

from .base import AGENT_PREFIX, CHANGED, DELTA_TYPES, Backend, LiveEvent, LocalBackend, Subscription

__all__ = [
    "AGENT_PREFIX",
    "CHANGED",
    "DELTA_TYPES",
    "INFLIGHT_SECONDS",
    "READY_SECONDS",
    "LiveEvent",
    "Subscription",
    "ainflight",
    "asubscribe",
    "backend",
    "clear_inflight",
    "inflight",
    "publish",
    "reset",
    "set_inflight",
    "set_streamed_seq",
    "streamed_seq",
    "subscribe",
    "transport_of",
]

logger = logging.getLogger("conversations.events")

INFLIGHT_SECONDS = 3600
"""How long an in-flight snapshot outlives its last update in the cache (a crashed run's)."""
READY_SECONDS = 5.0
"""The longest :func:`subscribe` waits for its transport to listen (then it goes on regardless)."""

_lock = threading.Lock()
_backends: dict[str, Backend] = {}
_pid = os.getpid()


def transport_of(url: object) -> str:
    """``"local"``, ``"redis"`` or ``"postgres"`` for an ``EVENTS_URL``; ``ValueError`` otherwise."""
    if not isinstance(url, str):
        raise ValueError(f"must be a string, got {type(url).__name__}")
    value = url.strip().lower()
    if value == "":
        return "local"
    if value in ("postgres", "postgresql"):
        return "postgres"
    if value.partition("://")[0] in ("redis", "rediss", "unix") and "://" in value:
        return "redis"
    raise ValueError(
        f"{url!r} names no known transport: leave it empty (in-process), give a Redis URL "
        "(redis://host:6379/0) or the word 'postgres' (LISTEN/NOTIFY on the default database)"
    )


def backend() -> Backend:
    """The transport ``CONVERSATIONS["EVENTS_URL"]`` names, made once per process."""
    global _pid
    url = app_settings().EVENTS_URL
    with _lock:
        if os.getpid() != _pid:  # forked: the parent's threads and sockets are not ours
            _backends.clear()
            _pid = os.getpid()
        found = _backends.get(url)
        if found is None:
            found = _backends[url] = _make(url)
        return found


def _make(url: str) -> Backend:
    kind = transport_of(url)
    if kind == "redis":
        from .redis_backend import RedisBackend

        return RedisBackend(url)
    if kind == "postgres":
        from .postgres_backend import PostgresBackend

        return PostgresBackend(url)
    return LocalBackend()


def reset() -> None:
    """Close every transport of this process (the next use makes a new one)."""
    with _lock:
        made = list(_backends.values())
        _backends.clear()
    for transport in made:
        transport.close()


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "CONVERSATIONS":
        reset()


def publish(run_id: UUID | str, type: str, data: dict[str, Any] | None = None) -> None:
    """Publish one event of run ``run_id`` to every watcher; never raises."""
    try:
        backend().publish(LiveEvent(str(run_id), type, dict(data or {})))
    except Exception:
        logger.warning("live events: %s of run %s was not published", type, run_id, exc_info=True)


def subscribe(run_id: UUID | str, *, ready_seconds: float = READY_SECONDS) -> Subscription:
    """Start receiving the events of run ``run_id`` (close the subscription when done).

    Returns once the transport listens to the run (at most ``ready_seconds``).
    """
    subscription = backend().subscribe(str(run_id))
    if not subscription.wait_ready(ready_seconds):
        logger.warning("live events: run %s is not listened to yet; going on", run_id)
    return subscription


async def asubscribe(run_id: UUID | str, *, ready_seconds: float = READY_SECONDS) -> Subscription:
    """:func:`subscribe` for asyncio code: waits on the event loop, holding no thread."""
    subscription = backend().subscribe(str(run_id))
    if not await subscription.aready(ready_seconds):
        logger.warning("live events: run %s is not listened to yet; going on", run_id)
    return subscription


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


async def ainflight(run_id: UUID | str) -> dict[str, Any] | None:
    """:func:`inflight` for asyncio code, in the shared thread pool.

    Not ``cache.aget``: Django runs that on the request's own thread, which
    an event stream has let go (``conversations.api.sse.stream``).
    """
    return await sync_to_async(inflight, thread_sensitive=False)(run_id)


def clear_inflight(run_id: UUID | str) -> None:
    """Forget the snapshot (its message is stored, or the answer failed)."""
    cache.delete(_inflight_key(run_id))


def _streamed_key(run_id: UUID | str) -> str:
    return f"conversations:seq:{run_id}"


def set_streamed_seq(run_id: UUID | str, seq: int) -> None:
    """Record ``seq``, the last delta of run ``run_id``'s answer that just ended streaming.

    Written when an answer's stream ends, before its turn is stored.
    """
    cache.set(_streamed_key(run_id), seq, INFLIGHT_SECONDS)


def streamed_seq(run_id: UUID | str) -> int:
    """The last ``seq`` of run ``run_id``'s answers that ended streaming (0: none yet).

    A watcher that has read the stored rows drops every delta at or below the
    figure it reads afterwards: such a delta was published before its turn
    was stored, and the turn (read now or at the next read) replaces it.
    """
    value = cache.get(_streamed_key(run_id))
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
