"""The run's heartbeat, refreshed from a background thread while the loop works."""

from __future__ import annotations

import logging
import threading
import uuid

from django.db import DatabaseError
from django.utils import timezone

from conversations.database import release_pooled_connections
from conversations.models import Run

from .fencing import fenced

__all__ = ["Heartbeat"]

logger = logging.getLogger("conversations.tool_loop")


class Heartbeat:
    """Refreshes the run's heartbeat from a background thread while the loop works.

    Between steps the loop refreshes it itself; this thread covers long
    provider calls and long tools, so recovery never takes a live run for a
    dead one. It beats every ``interval`` seconds (a third of the lease) and
    uses its own database connection.
    """

    def __init__(self, run: Run, *, interval: float) -> None:
        self.run = run
        self.run_id: uuid.UUID = run.pk
        self.interval = max(interval, 0.05)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(
            target=self._beat, name=f"heartbeat-{self.run_id}", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(self.interval):
                try:
                    # Fenced like every write: a run ended by recovery stays ended.
                    fenced(self.run).update(heartbeat_at=timezone.now())
                    # Minutes until the next beat: the pool's connection serves others meanwhile.
                    release_pooled_connections()
                except DatabaseError:
                    # A busy pool or a dropped connection: this beat is lost, not
                    # the next ones (a dead thread would let the lease expire).
                    logger.warning("run %s: heartbeat failed, trying again", self.run_id)
                    connection.close()
        finally:
            connection.close()
