"""The shape of a transport between processes: one listener thread, one connection.

A :class:`ListeningBackend` keeps, per process, one connection that listens
(``SUBSCRIBE`` in Redis, ``LISTEN`` in PostgreSQL) to the channels of the runs
this process's subscriptions watch, and one thread that reads it and hands
what arrives to the :class:`~conversations.events.base.Hub`. The channel of
a run is listened to while at least one subscription of the run is open (its
first one asks the thread to listen; its last one, closed, to stop). The
thread starts with the first subscription, reconnects after any error (with
a growing pause, re-listening to every channel) and is a daemon: it never
keeps a process alive.

Publishing uses a second connection, shared by the process's threads: a
publish that fails is logged and dropped, never raised into the loop, and
for a second after a failure events are dropped without trying (a database
or Redis that is down does not slow every delta down to a connect timeout).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .base import Hub, LiveEvent, Subscription, decode, encode

__all__ = ["ListeningBackend"]

logger = logging.getLogger("conversations.events")

RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)
"""Pauses before reconnecting the listener after consecutive failures."""
PUBLISH_PAUSE_SECONDS = 1.0
"""After a failed publish, events are dropped without trying for this long."""


class ListeningBackend:
    """A transport whose subclasses say how to connect, listen, wait and send."""

    spans_processes = True
    wait_seconds = 1.0
    """Longest the listener waits for a message before it looks at its channels again."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.hub = Hub()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._listening: set[str] = set()  # runs, touched by the listener thread only
        self._active: set[str] = set()  # runs whose channel is listened to (under _lock)
        self._publish_lock = threading.Lock()
        self._publisher: Any = None
        self._publish_paused_until = 0.0

    # Subscribing ---------------------------------------------------------------------

    def subscribe(self, run_id: str) -> Subscription:
        subscription = Subscription(run_id, self._forget, ready=False)
        self.hub.add(subscription)
        with self._lock:
            active = run_id in self._active
            self._ensure_thread()
        if active:
            subscription.mark_ready()
        else:
            self._wake()
        return subscription

    def _forget(self, subscription: Subscription) -> None:
        if self.hub.discard(subscription):
            self._wake()

    def _ensure_thread(self) -> None:
        # Called with the lock held.
        if self._thread is not None and self._thread.is_alive():
            return
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._listen_forever, name=f"conversations-events-{self.scheme}", daemon=True
        )
        self._thread.start()

    def _listen_forever(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                self._connect()
                failures = 0
                self._listening = set()
                while not self._stopping.is_set():
                    self._sync_channels()
                    for payload in self._receive(self.wait_seconds):
                        event = decode(payload)
                        if event is not None:
                            self.hub.deliver(event)
            except Exception:
                if self._stopping.is_set():
                    break
                pause = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                logger.warning(
                    "live events: the %s listener failed; reconnecting in %.1f s",
                    self.scheme,
                    pause,
                    exc_info=True,
                )
                with self._lock:
                    self._active.clear()
                self._stopping.wait(pause)
            finally:
                self._quietly(self._disconnect)
        with self._lock:
            self._active.clear()

    def _sync_channels(self) -> None:
        """Listen to the runs subscribed to, stop listening to the others."""
        wanted = self.hub.runs()
        added = wanted - self._listening
        removed = self._listening - wanted
        if removed:
            with self._lock:
                self._active -= removed
            self._unlisten(removed)
            self._listening -= removed
        if added:
            self._listening |= added
            self._listen(added)

    def _confirmed(self, runs: set[str]) -> None:
        """The channels of ``runs`` are now listened to: their subscriptions are ready."""
        with self._lock:
            self._active |= runs & self._listening
        for run_id in runs:
            self.hub.mark_ready(run_id)

    # Publishing ----------------------------------------------------------------------

    def publish(self, event: LiveEvent) -> None:
        payload = encode(event)
        with self._publish_lock:
            if time.monotonic() < self._publish_paused_until:
                return
            try:
                if self._publisher is None:
                    self._publisher = self._open_publisher()
                self._send(self._publisher, event.run_id, payload)
            except Exception:
                logger.warning(
                    "live events: publishing %s of run %s over %s failed; dropped",
                    event.type,
                    event.run_id,
                    self.scheme,
                    exc_info=True,
                )
                self._publish_paused_until = time.monotonic() + PUBLISH_PAUSE_SECONDS
                publisher, self._publisher = self._publisher, None
                if publisher is not None:
                    self._quietly(lambda: self._close_publisher(publisher))

    # Lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the listener, close both connections (subscriptions stay open, silent)."""
        self._stopping.set()
        self._wake()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        with self._publish_lock:
            publisher, self._publisher = self._publisher, None
        if publisher is not None:
            self._quietly(lambda: self._close_publisher(publisher))

    @staticmethod
    def _quietly(action: Any) -> None:
        try:
            action()
        except Exception:
            logger.debug("live events: error while closing", exc_info=True)

    # What a transport provides -------------------------------------------------------

    scheme = "?"

    def _connect(self) -> None:
        """Open the listening connection (in the listener thread)."""
        raise NotImplementedError

    def _disconnect(self) -> None:
        """Close it (in the listener thread); must do nothing when none is open."""
        raise NotImplementedError

    def _listen(self, runs: set[str]) -> None:
        """Start listening to ``runs``' channels; call :meth:`_confirmed` once it took effect."""
        raise NotImplementedError

    def _unlisten(self, runs: set[str]) -> None:
        raise NotImplementedError

    def _receive(self, timeout: float) -> list[str]:
        """The payloads that arrived, waiting up to ``timeout`` for one or a wake-up."""
        raise NotImplementedError

    def _wake(self) -> None:
        """Make a waiting :meth:`_receive` return soon (from any thread)."""
        raise NotImplementedError

    def _open_publisher(self) -> Any:
        raise NotImplementedError

    def _send(self, publisher: Any, run_id: str, payload: str) -> None:
        raise NotImplementedError

    def _close_publisher(self, publisher: Any) -> None:
        raise NotImplementedError
