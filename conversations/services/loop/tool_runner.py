"""Executing the runnable calls of one turn: concurrently, each within its timeout.

The loop's thread schedules and waits; the tools run elsewhere. A synchronous
tool runs in a worker thread of the process's pool (daemon threads that live
on between calls, turns and runs, so a tool that never returns cannot hold up
the process's exit), an ``async def`` tool as a task on one event loop per
turn, hosted by a worker of that pool. The guarantees:

- At most ``TOOL_CONCURRENCY`` calls of a turn run at once. The calls of a
  tool declared ``concurrent=False`` run one at a time, alone, after the
  turn's other calls.
- The outcomes come back in the order of the calls, whatever order the tools
  finish in.
- A call still running when its timeout passes is answered ``timed_out``. Its
  thread cannot be stopped: it is abandoned, never waited for, and runs its
  function to the end in the background; what it returns is dropped. Only the
  loop's thread writes the turn's results, so a late result is never stored.
  A timed-out ``async`` call's task is cancelled. An abandoned worker never
  delays another call: a call that finds no idle worker gets a new thread.
- ``tool_call_started`` is sent and each call's span started in the loop's
  thread, so the span is a child of the run's. The worker makes that span
  current, and runs each call in a copy of the loop thread's context
  variables (a run's shared MCP connections live there).
- Once a cancellation is seen, no further call starts (each is answered
  cancelled); calls already running finish, or time out, and keep their answers.
- A worker closes the database connections it has open when its call ends,
  before it hands the outcome over: an idle worker holds no connection.
- With a connection pool, the loop's thread gives its connection back before
  it waits for the tools (it needs none until they end), so a slow tool keeps
  no pooled connection checked out.

See docs/adr/0010-concurrent-tool-calls.md for why threads, why abandoning,
and why the threads live on.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import connections
from django.utils import timezone

from conversations import signals
from conversations.conf import tool_concurrency, tool_timeout
from conversations.database import release_pooled_connections
from conversations.models import Run
from conversations.models import ToolCall as ToolCallRow
from conversations.tools import Tool

from ..usage import tracing
from .runs import CancelWatch
from .tool_calls import (
    CallOutcome,
    cancelled_call,
    execute_call,
    execute_call_async,
    timed_out_call,
)

__all__ = ["run_calls"]

_IDLE_NAME = "conversations-tools-idle"


def run_calls(
    *, run: Run, calls: Sequence[tuple[ToolCallRow, Tool]], watch: CancelWatch
) -> list[CallOutcome]:
    """Execute checked ``calls`` (marked running) and return their outcomes, in call order.

    Raises :class:`~conversations.exceptions.ConfigurationError` naming the
    setting when ``TOOL_CONCURRENCY`` or ``TOOL_TIMEOUT_SECONDS`` is unusable.
    """
    limit, default_timeout = tool_concurrency(), tool_timeout()
    together = [i for i, (_, tool) in enumerate(calls) if tool.concurrent]
    alone = [i for i, (_, tool) in enumerate(calls) if not tool.concurrent]
    release_pooled_connections()
    with _EventLoop(limit) as loop:
        turn = _Turn(run, calls, watch, loop, default_timeout, limit)
        turn.execute(together, limit=limit)
        for index in alone:
            turn.execute([index], limit=1)
    return [turn.outcomes[i] for i in range(len(calls))]


class _Workers:
    """The process's pool of tool threads: daemon threads that wait for the next call.

    A call goes to an idle worker when there is one, else to a new thread, so
    a busy or abandoned worker never makes a call wait. A worker that finishes
    stays for the next call while fewer than ``keep`` workers are idle (the
    ``TOOL_CONCURRENCY`` of the latest turn), and ends otherwise: the idle
    threads are bounded, the busy ones are the calls running.
    """

    def __init__(self) -> None:
        self._reset()
        # A forked child (a prefork worker) inherits the counts, not the
        # threads: it starts with an empty pool of its own.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._keep = 0

    @property
    def idle(self) -> int:
        """How many workers wait for a call now."""
        return self._idle

    def submit(self, job: Callable[[], None], *, keep: int) -> None:
        """Run ``job`` (which must not raise) in an idle worker, or in a new one."""
        with self._lock:
            self._keep = keep
            if self._idle:
                # Exactly one job per idle worker that waits (or is about to).
                self._idle -= 1
                self._jobs.put(job)
                return
        thread = threading.Thread(target=self._serve, args=(job,), name=_IDLE_NAME, daemon=True)
        thread.start()

    def _serve(self, job: Callable[[], None]) -> None:
        jobs = self._jobs
        while True:
            job()  # one that raises ends this worker (busy, so no count changes)
            with self._lock:
                # (``jobs`` is no longer the pool's only in a child forked by a
                # tool this worker ran: that copy of the worker just ends.)
                if jobs is not self._jobs or self._idle >= self._keep:
                    return
                self._idle += 1
            job = jobs.get()


_workers = _Workers()


@dataclass(slots=True, eq=False)
class _Job:
    """One call on its way: where its outcome will appear and when it is due."""

    index: int
    row: ToolCallRow
    seconds: float
    started_at: datetime
    deadline: float
    """``time.monotonic()`` after which the call is answered as timed out."""
    span: tracing.ToolSpan
    stop: Callable[[], object] | None = None
    """Cancels the call at its timeout (an event loop task); ``None``: a thread, only dropped."""


_Ended = tuple[_Job, CallOutcome | None, BaseException | None]
"""A call that has ended: its outcome, or what it raised past ``execute_call``'s net."""


class _Turn:
    """The outcomes of one turn's calls, filled by index as the calls end."""

    def __init__(
        self,
        run: Run,
        calls: Sequence[tuple[ToolCallRow, Tool]],
        watch: CancelWatch,
        loop: _EventLoop,
        default_timeout: float,
        limit: int,
    ) -> None:
        self.run, self.calls, self.watch, self.loop = run, calls, watch, loop
        self.default_timeout, self.limit = default_timeout, limit
        self.outcomes: dict[int, CallOutcome] = {}
        # Every call of the turn reports here when it ends, late ones included.
        self.ended: queue.SimpleQueue[_Ended] = queue.SimpleQueue()

    def execute(self, indices: Sequence[int], *, limit: int) -> None:
        """Run the calls at ``indices``, at most ``limit`` at once, until each has an outcome."""
        waiting = list(reversed(indices))
        running: dict[int, _Job] = {}
        try:
            while waiting or running:
                while waiting and len(running) < limit:
                    index = waiting.pop()
                    if self.watch.cancelled():
                        self.outcomes[index] = cancelled_call(row=self.calls[index][0])
                    else:
                        running[index] = self._start(index)
                if not running:
                    break
                due = min(job.deadline for job in running.values())
                for job, outcome, error in self._wait(until=due):
                    if running.get(job.index) is not job:
                        continue  # the late end of a call already answered timed out
                    if error is not None:
                        raise error  # the job stays in ``running``: see ``finally``
                    assert outcome is not None
                    self._finish(job, outcome)
                    del running[job.index]
                now = time.monotonic()
                for index, job in list(running.items()):
                    if job.deadline <= now:
                        del running[index]
                        if job.stop is not None:
                            job.stop()
                        self._finish(job, _timed_out(job))
        finally:
            # Calls are left here only when something raised past ``Exception``
            # (a tool, a signal receiver): the loop ends the run failed, and
            # answers them as interrupted. Their spans end now.
            for job in running.values():
                job.span.finished(status=ToolCallRow.Status.INTERRUPTED, result="")

    def _wait(self, *, until: float) -> list[_Ended]:
        """The calls that end before ``until`` (``time.monotonic()``): the first, and any others."""
        try:
            ended = [self.ended.get(timeout=max(until - time.monotonic(), 0))]
        except queue.Empty:
            return []
        while True:
            try:
                ended.append(self.ended.get_nowait())
            except queue.Empty:
                return ended

    def _start(self, index: int) -> _Job:
        row, tool = self.calls[index]
        signals.tool_call_started.send(sender=ToolCallRow, tool_call=row, run=self.run)
        span = tracing.start_tool_span(name=row.name, call_id=row.call_id, arguments=row.arguments)
        seconds = tool.timeout if tool.timeout is not None else self.default_timeout
        job = _Job(
            index=index,
            row=row,
            seconds=seconds,
            started_at=timezone.now(),
            deadline=time.monotonic() + seconds,
            span=span,
        )
        if tool.is_async:
            future = self.loop.submit(_call_async(self.run, row, tool, span))
            job.stop = future.cancel
            future.add_done_callback(lambda done: self.ended.put(_ended_task(job, done)))
        else:
            _workers.submit(self._in_worker(job, tool), keep=self.limit)
        return job

    def _in_worker(self, job: _Job, tool: Tool) -> Callable[[], None]:
        """The job a worker runs for ``job``: in a copy of this thread's context."""
        run, row, span, ended = self.run, job.row, job.span, self.ended
        context = contextvars.copy_context()
        name = f"conversations-tool-{row.call_id}"

        def work() -> None:
            worker = threading.current_thread()
            worker.name = name
            try:
                outcome = context.run(_execute_in_span, run, row, tool, span)
            except BaseException as exc:  # past execute_call's net (SystemExit...): the loop's
                _close_connections()
                ended.put((job, None, exc))
            else:
                # Before the result is handed over: once the loop has it, the turn may end.
                _close_connections()
                ended.put((job, outcome, None))
            finally:
                worker.name = _IDLE_NAME

        return work

    def _finish(self, job: _Job, outcome: CallOutcome) -> None:
        job.span.finished(status=outcome.status, result=outcome.content)
        self.outcomes[job.index] = outcome


def _execute_in_span(run: Run, row: ToolCallRow, tool: Tool, span: tracing.ToolSpan) -> CallOutcome:
    with span.current():
        return execute_call(run=run, row=row, tool=tool)


def _ended_task(job: _Job, future: Future[CallOutcome]) -> _Ended:
    if future.cancelled():
        # Only a call already answered (timed out, or its turn over) is cancelled.
        return job, None, asyncio.CancelledError()
    error = future.exception()
    return (job, None, error) if error is not None else (job, future.result(), None)


def _timed_out(job: _Job) -> CallOutcome:
    return timed_out_call(row=job.row, seconds=job.seconds, started_at=job.started_at)


def _close_connections() -> None:
    """Close the database connections this thread has open (a worker's, never the loop's).

    Only those actually open: a worker that did not touch the database pays
    nothing, and its connection wrappers stay for the next call.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            connection.close()


async def _call_async(
    run: Run, row: ToolCallRow, tool: Tool, span: tracing.ToolSpan
) -> CallOutcome:
    # Its own thread-sensitive context: the ORM calls the tool makes through
    # sync_to_async share one thread, whose connections are closed at the end.
    async with ThreadSensitiveContext():
        try:
            with span.current():
                return await execute_call_async(run=run, row=row, tool=tool)
        finally:
            await sync_to_async(_close_connections)()


class _EventLoop:
    """One event loop, hosted by a worker from the turn's first async call on.

    At the end of the turn it is told to stop and is not waited for: tasks
    cancelled at their timeout unwind there, and a task that does not let go
    keeps only that worker.
    """

    def __init__(self, keep: int) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._keep = keep

    def submit(self, coroutine: Coroutine[Any, Any, CallOutcome]) -> Future[CallOutcome]:
        if self._loop is None:
            self._loop = loop = asyncio.new_event_loop()
            _workers.submit(lambda: _serve(loop), keep=self._keep)
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def __enter__(self) -> _EventLoop:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
        # The worker lives on: it must not keep a closed loop as its current one.
        asyncio.set_event_loop(None)
