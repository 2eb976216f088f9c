"""The two time bounds of a streamed answer, and the watchdog that holds a stream to them.

A stream may go on for as long as it keeps saying something: the *idle*
bound is the provider's ``timeout`` since the last meaningful record (a
delta, a call fragment, a finish or usage). Comments, keep-alive pings and
blank lines do not count. Before the first meaningful record the idle bound
is the deadline of the whole exchange (request, retries and waits), as for a
whole answer. The *total* bound (``max_stream_seconds``) caps the stream
whatever it sends.

httpx's read timeout applies to each read, so a server dripping a byte now
and then never trips it. Two things enforce the bounds instead: the reader
checks the clock after every chunk, and a watchdog thread shuts the socket
down when the bound passes while the reader waits for a chunk that does not
come, which ends that wait at once.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

import httpx

from conversations.exceptions import ProviderTimeout

__all__ = ["DEFAULT_MAX_STREAM_SECONDS", "StreamDeadline"]

DEFAULT_MAX_STREAM_SECONDS = 600.0
"""How long a streamed answer may last at most, unless the provider record says otherwise."""


class StreamDeadline:
    """The bounds of one streamed request (all its attempts); a context manager."""

    def __init__(self, *, name: str, idle_seconds: float, total_seconds: float) -> None:
        start = time.monotonic()
        self._name = name
        self._idle_seconds = idle_seconds
        self._total_seconds = total_seconds
        self.first_deadline = start + idle_seconds
        """The deadline of the exchange before anything meaningful arrived (retries respect it)."""
        self._idle_at = self.first_deadline
        self._total_at = start + total_seconds
        self.passed: str | None = None
        """``"idle"`` or ``"total"`` once a bound has passed."""
        self._condition = threading.Condition()
        self._socket: socket.socket | None = None
        self._watchdog: threading.Thread | None = None
        self._closed = False

    def __enter__(self) -> StreamDeadline:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._condition:
            self._closed = True
            self._socket = None
            self._condition.notify_all()

    def progressed(self) -> None:
        """A meaningful record arrived: the idle bound starts again."""
        self._idle_at = time.monotonic() + self._idle_seconds

    def check(self) -> None:
        """Raise :class:`ProviderTimeout` when a bound has passed."""
        now = time.monotonic()
        with self._condition:
            if self.passed is None:
                if now >= self._total_at:
                    self.passed = "total"
                elif now >= self._idle_at:
                    self.passed = "idle"
        if self.passed is not None:
            raise self.error()

    def error(self) -> ProviderTimeout:
        """The error of the bound that passed."""
        if self.passed == "total":
            return ProviderTimeout(
                f"{self._name}: the stream went on past {self._total_seconds:g} s"
            )
        return ProviderTimeout(
            f"{self._name}: the stream sent nothing meaningful for {self._idle_seconds:g} s"
        )

    def watch(self, response: httpx.Response) -> None:
        """Shut ``response``'s socket down when a bound passes while it is read."""
        sock = _socket_of(response)
        if sock is None:
            return  # not a real connection (a test transport): the reader's checks suffice
        with self._condition:
            self._socket = sock
            if self._watchdog is None:
                self._watchdog = threading.Thread(
                    target=self._watch, name="conversations-stream-deadline", daemon=True
                )
                self._watchdog.start()

    def unwatch(self) -> None:
        """The attempt's response is closed: nothing to shut down any more."""
        with self._condition:
            self._socket = None

    def _watch(self) -> None:
        with self._condition:
            while not self._closed:
                now = time.monotonic()
                due = min(self._idle_at, self._total_at)
                if now < due:
                    # Woken early by a new attempt or the end; a moved idle bound is re-read.
                    self._condition.wait(due - now)
                    continue
                self.passed = self.passed or ("total" if now >= self._total_at else "idle")
                if self._socket is not None:
                    # Unlike close(), shutdown() wakes a read blocked on this socket.
                    with contextlib.suppress(OSError):
                        self._socket.shutdown(socket.SHUT_RDWR)
                    self._socket = None
                return


def _socket_of(response: httpx.Response) -> socket.socket | None:
    stream: Any = response.extensions.get("network_stream")
    get_extra_info = getattr(stream, "get_extra_info", None)
    if not callable(get_extra_info):
        return None
    sock = get_extra_info("socket")
    return sock if isinstance(sock, socket.socket) else None
