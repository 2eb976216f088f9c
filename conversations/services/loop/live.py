"""A run's answers as they are written: deltas to watchers, the whole answer to the loop.

The tool loop hands each streamed answer to :meth:`LiveRun.consume`. The
provider's stream is iterated in a helper thread that only moves its items
onto a queue; the loop's thread takes them off, folds each delta into a
:class:`~conversations.providers.streaming.PartialTurn`, writes the in-flight
snapshot and then publishes the delta (see ``conversations.events``). No row
is written per delta: what the loop stores is the final
:class:`~conversations.domain.CompletionResponse`, exactly as if the answer
had arrived whole.

Waiting on the queue with a short timeout lets the loop notice a cancellation
request within about a second even while the provider is silent. Then the
helper thread is told to stop: it closes the provider's stream (in its own
thread, the one iterating it) as soon as the stream hands it control, and
whatever it still receives is dropped. The helper thread never touches the
database, the cache or the events: everything the run records is written by
the loop's thread.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import transaction

from conversations import events
from conversations.domain import (
    CompletionResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from conversations.domain.timing import milliseconds
from conversations.exceptions import ProviderResponseError
from conversations.providers.streaming import PartialTurn

from .runs import CancelWatch

__all__ = [
    "CANCELLED_FINISH_REASON",
    "POLL_SECONDS",
    "TIMEOUT_FINISH_REASON",
    "LiveRun",
    "Streamed",
]

logger = logging.getLogger("conversations.tool_loop")

POLL_SECONDS = 0.1
"""How long the loop waits for the next delta before it looks at the cancel watch again."""

CANCELLED_FINISH_REASON = "cancelled"
"""The finish reason of an answer a cancellation cut short while it streamed."""

TIMEOUT_FINISH_REASON = "timeout"
"""The finish reason of an answer a stream's deadline cut short (the run then fails)."""

_EVENT_TYPES: dict[type[Any], str] = {
    TextDelta: "text.delta",
    ReasoningDelta: "reasoning.delta",
    ToolCallDelta: "tool_call.delta",
}


@dataclass(frozen=True, slots=True)
class Streamed:
    """How one streamed answer ended."""

    partial: PartialTurn
    """Everything the stream showed (the text so far, when it was cancelled)."""
    response: CompletionResponse | None
    """The provider's whole answer; ``None`` when the run was cancelled or the stream failed."""
    first_delta_ms: int | None
    """Milliseconds from the request to the first delta (``None``: there was none)."""
    failure: Exception | None = None
    """Why the stream ended without its answer (``None`` with no response: cancelled)."""


class _End:
    """The stream ended (without its answer, unless that came first)."""


_Item = StreamEvent | BaseException | _End


class _Pump:
    """Iterates a provider's stream in a helper thread, onto a queue the loop reads."""

    def __init__(self, stream: Iterator[StreamEvent]) -> None:
        self._stream = stream
        self._items: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="conversations-stream", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def get(self, timeout: float) -> _Item | None:
        """The next item, or ``None`` when none came within ``timeout`` seconds."""
        try:
            return self._items.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self) -> None:
        """Ask the helper thread to close the stream the next time it has control."""
        self._stop.set()

    def _run(self) -> None:
        try:
            for event in self._stream:
                if self._stop.is_set():
                    break
                self._items.put(event)
                if isinstance(event, CompletionResponse):
                    break
            else:
                self._items.put(_End())
        except BaseException as exc:  # handed over to the loop's thread, which raises it
            self._items.put(exc)
        finally:
            # Here, in the thread that iterated it: a generator can only be closed
            # while it is not running, and closing it closes its HTTP response.
            close = getattr(self._stream, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()


class LiveRun:
    """What watchers of one run see: its deltas, the in-flight snapshot, ``changed``."""

    def __init__(self, run_id: UUID, *, stream: bool, callers: tuple[UUID, ...] = ()) -> None:
        self.run_id = run_id
        self.stream = stream
        """Whether answers are asked for as streams (the profile's choice)."""
        self.callers = callers
        """An agent's run: the runs above it, nearest first; each also sees its events as
        ``agent.*`` events carrying this run's id (see :meth:`agent_event`)."""
        # ``seq`` grows over the whole run, also across a resumption in another process.
        self.seq: int = _streamed_seq(run_id)
        self._warned = False

    def consume(
        self, stream: Iterator[StreamEvent], *, watch: CancelWatch, started: float
    ) -> Streamed:
        """Relay ``stream`` until its answer arrives, the run is cancelled, or it fails.

        ``started`` is the ``time.monotonic()`` of the request. A failure of
        the provider is returned as ``failure`` with what streamed before it
        (the snapshot is cleared first).
        """
        partial = PartialTurn()
        first: int | None = None
        pump = _Pump(stream)
        pump.start()
        try:
            while True:
                item = pump.get(POLL_SECONDS)
                if isinstance(item, CompletionResponse):
                    return Streamed(partial, item, first)
                if isinstance(item, Exception):
                    self.clear()
                    return Streamed(partial, None, first, item)
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, _End):
                    self.clear()
                    ended = ProviderResponseError("the stream ended without the whole answer")
                    return Streamed(partial, None, first, ended)
                if item is not None:
                    if first is None:
                        first = milliseconds(time.monotonic() - started)
                    partial.add(item)
                    self._relay(item, partial)
                if watch.cancelled():
                    return Streamed(partial, None, first)
        except BaseException:
            self.clear()
            raise
        finally:
            pump.stop()
            self._remember_seq()

    def _relay(
        self, delta: TextDelta | ReasoningDelta | ToolCallDelta, partial: PartialTurn
    ) -> None:
        """Snapshot first, then publish: a watcher joining in between misses nothing."""
        self.seq += 1
        data: dict[str, Any] = {"seq": self.seq}
        if isinstance(delta, ToolCallDelta):
            data.update(index=delta.index, id=delta.id, name=delta.name, arguments=delta.arguments)
        else:
            data["text"] = delta.text
        snapshot = {**partial.to_dict(), "seq": self.seq}
        self._best_effort(events.set_inflight, self.run_id, snapshot)
        self._best_effort(events.publish, self.run_id, _EVENT_TYPES[type(delta)], data)
        self.agent_event(_EVENT_TYPES[type(delta)], data)

    def agent_event(self, kind: str, data: dict[str, Any] | None = None) -> None:
        """Publish ``agent.<kind>`` with this run's id to the runs above it (none: nothing).

        Live only, like deltas: a watcher of a caller that joins later reads the
        agent's run itself (``GET /runs/{id}/``, its own event stream).
        """
        for caller in self.callers:
            body = {"run": str(self.run_id), **(data or {})}
            self._best_effort(events.publish, caller, f"agent.{kind}", body)

    def clear(self) -> None:
        """Forget the in-flight snapshot (about to be stored, failed or cancelled).

        Before its turn is stored, never after: a watcher reads the rows, then
        the snapshot, and must not find the snapshot of a turn it has read.
        """
        self._best_effort(events.clear_inflight, self.run_id)

    def changed(self) -> None:
        """Publish ``changed`` once what the loop just wrote is committed."""

        def notify() -> None:
            self._best_effort(events.publish, self.run_id, events.CHANGED, {})
            self.agent_event(events.CHANGED)

        transaction.on_commit(notify, robust=True)

    def _remember_seq(self) -> None:
        self._best_effort(events.set_streamed_seq, self.run_id, self.seq)

    def _best_effort(self, action: Any, *args: Any) -> None:
        """Watching is best effort: a broken transport must not fail the run."""
        try:
            action(*args)
        except Exception:
            if not self._warned:
                self._warned = True
                logger.warning("run %s: live events are failing", self.run_id, exc_info=True)


def _streamed_seq(run_id: UUID) -> int:
    try:
        return events.streamed_seq(run_id)
    except Exception:
        logger.warning("the cache cannot be read; live events restart at seq 1", exc_info=True)
        return 0
