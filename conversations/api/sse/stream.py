"""A run's whole event stream: persisted events, the answer in flight, live deltas.

:class:`RunEventStream` follows one run after a persisted event id:

1. it subscribes to the run's live events (:mod:`conversations.events`), and
   only then
2. reads the persisted events after that id (:class:`RowEvents`), then
3. when an answer is streaming, sends one ``inflight`` event with the
   snapshot of it (``{"seq", "text", "reasoning", "tool_calls"}``), then
4. relays each delta (``text.delta``, ``reasoning.delta``,
   ``tool_call.delta``) whose ``seq`` is above the last one sent, and reads
   the persisted events again on every ``changed``.

Subscribing first is what makes this exact: a delta published after the
snapshot was read is in the subscription, one published before is in the
snapshot (the loop writes the snapshot before it publishes). And the loop
forgets the snapshot before it commits the answer's turn: a stream that has
sent a stored turn never reads that answer's snapshot afterwards (the rows
are read before the snapshot), so no client shows it twice. Nor its deltas:
a delta published before its turn was stored can still be waiting in the
subscription when a read of the rows (a periodic one, say) finds the turn.
When an answer's stream ends, before its turn is stored, the loop records
its last ``seq`` (:func:`conversations.events.streamed_seq`); after every
read of the rows the stream reads that figure and from then on drops the
deltas at or below it. Deltas and the
snapshot have no id: ``Last-Event-ID`` only ever names a persisted event, and
a client that reconnects gets the snapshot again. Should a delta be lost on
the way (``seq`` skips), the snapshot is read and sent again.

Notifications may be missed (a transport reconnecting, a run executed by a
process the in-process bus cannot hear), so the rows are also read every
``poll_seconds``: every :data:`POLL_SECONDS` with the in-process bus (the
run may be executed by another process that nothing tells us about),
every :data:`FALLBACK_POLL_SECONDS` with a bus between processes.

:meth:`RunEventStream.follow` (threads) and :meth:`RunEventStream.afollow`
(asyncio) give batches of :class:`RunEvent` (an empty batch after
``keepalive_seconds`` of silence); :meth:`~RunEventStream.iter_sync` and
:meth:`~RunEventStream.iter_async` write them as Server-Sent Events. Under
WSGI the stream waits in its request thread; under ASGI it waits on the event
loop and borrows a thread of the shared pool only for each short read of the
rows, so an idle stream holds no thread.

Should a read find the connection pool dry (no connection within its
timeout), the stream ends with one ``error`` event (``service_unavailable``,
``retry_after`` in seconds, and a ``retry:`` line to match) instead of
breaking off: the client reconnects with ``Last-Event-ID`` and misses nothing.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any
from uuid import UUID

from asgiref.sync import SyncToAsync, sync_to_async
from django.db import DatabaseError, close_old_connections, connections

from conversations import events
from conversations.database import RETRY_AFTER_SECONDS, database_busy
from conversations.events import AGENT_PREFIX, CHANGED, DELTA_TYPES, LiveEvent

from ..errors import SERVICE_UNAVAILABLE
from .rows import RowEvents, RunEvent
from .slots import release_connections

__all__ = [
    "FALLBACK_POLL_SECONDS",
    "KEEPALIVE_SECONDS",
    "MAX_STREAM_SECONDS",
    "POLL_SECONDS",
    "RETRY_MS",
    "RunEventStream",
]

POLL_SECONDS = 0.5
"""How often a stream reads the rows with the in-process bus."""
FALLBACK_POLL_SECONDS = 5.0
"""How often it reads them anyway with a bus between processes (``changed`` wakes it sooner)."""
KEEPALIVE_SECONDS = 15.0
"""A comment line after this much silence keeps proxies from closing the connection."""
MAX_STREAM_SECONDS = 300.0
"""One response lasts at most this long; the client reconnects with ``Last-Event-ID``."""
RETRY_MS = 1000
"""The reconnection delay suggested to ``EventSource``."""

Batch = list[RunEvent]


class RunEventStream(RowEvents):
    """The events of one run after a given persisted event id, as they happen."""

    poll_seconds: float | None = None
    """Seconds between reads of the rows; ``None``: chosen by the bus (see the module)."""
    keepalive_seconds = KEEPALIVE_SECONDS
    max_seconds = MAX_STREAM_SECONDS

    def __init__(self, run_id: UUID, *, after: int = -1) -> None:
        super().__init__(run_id, after=after)
        self._seq = -1  # the last delta (or snapshot) sent
        self._started = self._last_write = self._next_poll = 0.0

    def _interval(self) -> float:
        if self.poll_seconds is not None:
            return self.poll_seconds
        return FALLBACK_POLL_SECONDS if events.backend().spans_processes else POLL_SECONDS

    # The decisions, shared by both transports -------------------------------------------

    def _begin(self) -> None:
        self._started = self._last_write = time.monotonic()
        self._next_poll = self._started + self._interval()

    def _timeout(self) -> float:
        """How long to wait for a live event before something is due."""
        due = min(
            self._next_poll,
            self._last_write + self.keepalive_seconds,
            self._started + self.max_seconds,
        )
        return max(0.0, due - time.monotonic())

    def _over(self) -> bool:
        return self.finished or time.monotonic() - self._started > self.max_seconds

    def _snapshot(self, snapshot: dict[str, Any] | None) -> Batch:
        if snapshot is None:
            return []
        seq = snapshot.get("seq")
        if isinstance(seq, int):
            self._seq = max(self._seq, seq)
        return [RunEvent(None, "inflight", snapshot)]

    def _react(self, live: LiveEvent | None) -> tuple[Batch, bool, bool]:
        """What a live event (``None``: none came) asks for: (events, read rows?, read snapshot?)."""
        now = time.monotonic()
        if live is None:
            return [], now >= self._next_poll, False
        if live.type == CHANGED:
            return [], True, False
        if live.type.startswith(AGENT_PREFIX):
            return [RunEvent(None, live.type, live.data)], False, False  # an agent's progress
        if live.type not in DELTA_TYPES:
            return [], False, False
        seq = live.data.get("seq")
        if not isinstance(seq, int):
            return [], False, False
        if seq <= self._seq:
            return [], False, False  # already in the snapshot sent
        if self._seq >= 0 and seq > self._seq + 1:
            return [], False, True  # one went missing: send the snapshot again
        self._seq = seq
        return [RunEvent(None, live.type, live.data)], False, False

    def _resync(self, snapshot: dict[str, Any] | None, live: LiveEvent | None) -> Batch:
        """After a gap: the snapshot when it covers the delta, else the delta itself."""
        seq = live.data.get("seq") if live is not None else None
        if snapshot is not None and isinstance(seq, int) and snapshot.get("seq", -1) >= seq:
            return self._snapshot(snapshot)
        if live is not None and isinstance(seq, int):
            self._seq = seq
            return [RunEvent(None, live.type, live.data)]
        return []

    def _sent(self, batch: Batch, polled: bool) -> Batch | None:
        """The batch to hand out (an empty one as a keep-alive), or ``None`` for nothing."""
        now = time.monotonic()
        if polled:
            self._next_poll = now + self._interval()
        if batch or now - self._last_write >= self.keepalive_seconds:
            self._last_write = now
            return batch
        return None

    def _read_rows(self) -> Batch:
        """The persisted events since the last read; then no delta of an answer already stored.

        The figure is read after the rows: any turn the read found had ended
        streaming, and recorded its last ``seq``, before it was committed.
        """
        batch = self.poll()
        self._seq = max(self._seq, events.streamed_seq(self.run_id))
        return batch

    # Threads ------------------------------------------------------------------------------

    def follow(self, first: Sequence[RunEvent] = ()) -> Iterator[Batch]:
        """Batches of events as they come (``first`` are already read); ends with the run."""
        if first:
            yield list(first)
        if self.finished:
            return
        with events.subscribe(self.run_id) as subscription:
            self._begin()
            opening = self._read_rows()
            if not self.finished:
                opening.extend(self._snapshot(events.inflight(self.run_id)))
            release_connections()
            if opening:
                yield opening
            while not self._over():
                live = subscription.get(self._timeout())
                batch, poll, resync = self._react(live)
                if resync:
                    batch = self._resync(events.inflight(self.run_id), live)
                if poll:
                    batch.extend(self._read_rows())
                    release_connections()  # none held while the stream waits or writes
                out = self._sent(batch, poll)
                if out is not None:
                    yield out

    def iter_sync(self, first: Sequence[RunEvent] = ()) -> Iterator[bytes]:
        """The stream for WSGI, as Server-Sent Events."""
        release_connections()
        yield f"retry: {RETRY_MS}\n\n".encode()
        try:
            for batch in self.follow(first):
                yield _encode(batch)
        except DatabaseError as exc:
            if not database_busy(exc):
                raise
            release_connections()
            yield _busy_event()

    # asyncio ------------------------------------------------------------------------------

    async def afollow(self, first: Sequence[RunEvent] = ()) -> AsyncIterator[Batch]:
        """:meth:`follow` for asyncio: waits on the event loop, reads rows in the thread pool."""
        poll = sync_to_async(self._poll_and_close, thread_sensitive=False)
        if first:
            yield list(first)
        if self.finished:
            return
        subscription = await events.asubscribe(self.run_id)
        try:
            self._begin()
            opening = await poll()
            if not self.finished:
                opening.extend(self._snapshot(await events.ainflight(self.run_id)))
            if opening:
                yield opening
            while not self._over():
                live = await subscription.aget(self._timeout())
                batch, polled, resync = self._react(live)
                if resync:
                    batch = self._resync(await events.ainflight(self.run_id), live)
                if polled:
                    batch.extend(await poll())
                out = self._sent(batch, polled)
                if out is not None:
                    yield out
        finally:
            subscription.close()

    async def iter_async(self, first: Sequence[RunEvent] = ()) -> AsyncIterator[bytes]:
        """The stream for ASGI, as Server-Sent Events."""
        _release_request_thread()
        yield f"retry: {RETRY_MS}\n\n".encode()
        try:
            async for batch in self.afollow(first):
                yield _encode(batch)
        except DatabaseError as exc:
            if not database_busy(exc):
                raise
            yield _busy_event()

    def _poll_and_close(self) -> list[RunEvent]:
        # Each poll is treated like a request: CONN_MAX_AGE decides whether the
        # pool thread keeps its connection, and a broken one is dropped.
        try:
            return self._read_rows()
        finally:
            close_old_connections()


def _encode(batch: Batch) -> bytes:
    if not batch:
        return b": keep-alive\n\n"
    return b"".join(event.encode() for event in batch)


def _busy_event() -> bytes:
    """The last words of a stream that found no free database connection."""
    retry = f"retry: {RETRY_AFTER_SECONDS * 1000}\n\n".encode()
    data = {
        "code": SERVICE_UNAVAILABLE,
        "detail": "The service is busy. Reconnect in a moment to resume the stream.",
        "retry_after": RETRY_AFTER_SECONDS,
    }
    return retry + RunEvent(None, "error", data).encode()


def _release_request_thread() -> None:
    """Let the thread Django kept for this ASGI request go while the stream idles.

    Django runs the sync parts of a request (middleware, this module's view)
    on a thread reserved for the request, which lives until the response has
    been sent: for a stream, the whole stream. Once the view has returned,
    nothing of this request needs that thread, so its executor is retired
    (after closing the view's database connection there); anything
    thread-sensitive later in the request simply gets a fresh one. asgiref
    offers no public call for this, hence the defensive look-ups: if its
    internals change, this does nothing and streams keep their thread.
    """
    context_var = getattr(SyncToAsync, "thread_sensitive_context", None)
    executors = getattr(SyncToAsync, "context_to_thread_executor", None)
    if context_var is None or executors is None:
        return
    context = context_var.get(None)
    if context is None or getattr(context, "_executor", None) is not None:
        return  # no per-request thread, or one the caller owns
    executor = executors.pop(context, None)
    if executor is not None:
        executor.submit(connections.close_all)
        executor.shutdown(wait=False)
