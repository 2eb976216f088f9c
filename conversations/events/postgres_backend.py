"""Live events over PostgreSQL ``LISTEN``/``NOTIFY`` on the default database.

``CONVERSATIONS["EVENTS_URL"] = "postgres"``: no other service to run. Each
run has its own channel, ``conv_ev_`` and a hash of its id (a valid
identifier of a fixed length, whatever the id), so a process hears only the
runs it watches. The listener is a psycopg connection of its own in
autocommit (outside Django's connection handling, so it is never returned to a
pool or closed at the end of a request), read without blocking anything else:
the thread waits on its socket and on a pipe that wakes it when the runs to
listen to change.

A ``NOTIFY`` payload must stay under 8000 bytes. A larger event (a tool
call's arguments in one delta, say) is sent in pieces
``~<message id>:<index>:<count>:<text>`` that the listener puts back
together; the pieces of one message come from one connection, so they arrive
in order and before that connection's next event.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import time
import uuid
from typing import Any

from .listener import ListeningBackend

__all__ = ["PostgresBackend", "channel_of", "split_payload"]

MAX_PAYLOAD_BYTES = 7900
"""The largest ``NOTIFY`` payload sent (PostgreSQL refuses 8000 bytes and more)."""
PIECE_MARK = "~"
PENDING_SECONDS = 30.0
"""A message whose pieces did not all arrive within this long is forgotten."""


def channel_of(run_id: str) -> str:
    """The channel of run ``run_id``: a lowercase identifier of 40 characters."""
    return "conv_ev_" + hashlib.blake2b(run_id.encode(), digest_size=16).hexdigest()


def split_payload(payload: str, limit: int = MAX_PAYLOAD_BYTES) -> list[str]:
    """``payload`` as one ``NOTIFY`` payload, or as pieces when it is larger than ``limit`` bytes."""
    data = payload.encode()
    if len(data) <= limit:
        return [payload]
    message = uuid.uuid4().hex[:16]
    room = limit - len(f"{PIECE_MARK}{message}:99999:99999:")
    chunks: list[str] = []
    start = 0
    while start < len(data):
        end = min(start + room, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # not inside a character
            end -= 1
        chunks.append(data[start:end].decode())
        start = end
    return [f"{PIECE_MARK}{message}:{i}:{len(chunks)}:{chunk}" for i, chunk in enumerate(chunks)]


class Reassembler:
    """Puts the pieces of large payloads back together."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[float, list[str | None]]] = {}

    def add(self, payload: str) -> str | None:
        """The whole payload once ``payload`` completes one (itself when it is whole)."""
        if not payload.startswith(PIECE_MARK):
            return payload
        try:
            message, index, count, text = payload[1:].split(":", 3)
            position, total = int(index), int(count)
        except ValueError:
            return None
        now = time.monotonic()
        for key in [k for k, (at, _) in self._pending.items() if now - at > PENDING_SECONDS]:
            del self._pending[key]
        _, parts = self._pending.setdefault(message, (now, [None] * total))
        if not (0 <= position < len(parts)):
            return None
        parts[position] = text
        if any(part is None for part in parts):
            return None
        del self._pending[message]
        return "".join(part or "" for part in parts)


def connection_params() -> dict[str, Any]:
    """How to connect to the default database, as Django would (settings, ``OPTIONS``)."""
    from django.db import connections

    params = dict(connections["default"].get_connection_params())
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    params.setdefault("connect_timeout", 5)
    return params


class PostgresBackend(ListeningBackend):
    """``LISTEN``/``NOTIFY`` on the default database."""

    scheme = "postgres"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._connection: Any = None
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._pieces = Reassembler()

    def _connect(self) -> None:
        import psycopg

        self._connection = psycopg.connect(**connection_params(), autocommit=True)
        self._connection.pgconn.nonblocking = 0
        self._pieces = Reassembler()

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _execute(self, sql: str) -> None:
        from psycopg import OperationalError, pq

        result = self._connection.pgconn.exec_(sql.encode())
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise OperationalError((result.error_message or b"").decode(errors="replace"))

    def _listen(self, runs: set[str]) -> None:
        self._execute("".join(f"LISTEN {channel_of(run)};" for run in sorted(runs)))
        self._confirmed(runs)  # LISTEN takes effect at once in autocommit

    def _unlisten(self, runs: set[str]) -> None:
        self._execute("".join(f"UNLISTEN {channel_of(run)};" for run in sorted(runs)))

    def _receive(self, timeout: float) -> list[str]:
        pgconn = self._connection.pgconn
        payloads = self._drain(pgconn)
        if payloads:
            return payloads
        readable, _, _ = select.select([pgconn.socket, self._wake_read], [], [], timeout)
        if self._wake_read in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(self._wake_read, 4096):
                    pass
        if pgconn.socket in readable:
            pgconn.consume_input()  # raises when the connection is gone
        return self._drain(pgconn)

    def _drain(self, pgconn: Any) -> list[str]:
        payloads = []
        while (notify := pgconn.notifies()) is not None:
            whole = self._pieces.add(notify.extra.decode(errors="replace"))
            if whole is not None:
                payloads.append(whole)
        return payloads

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_write, b"x")

    def _open_publisher(self) -> Any:
        import psycopg

        return psycopg.connect(**connection_params(), autocommit=True)

    def _send(self, publisher: Any, run_id: str, payload: str) -> None:
        channel = channel_of(run_id)
        for piece in split_payload(payload):
            publisher.execute("SELECT pg_notify(%s, %s)", (channel, piece))

    def _close_publisher(self, publisher: Any) -> None:
        publisher.close()

    def close(self) -> None:
        super().close()
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
