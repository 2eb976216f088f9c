"""Executing the runnable calls of one turn: concurrently, each within its timeout.

The loop's thread schedules and waits; the tools run elsewhere. A synchronous
tool runs in a worker thread of its own (a daemon thread, so a tool that never
returns cannot hold up the process's exit), an ``async def`` tool as a task
on one event loop in a helper thread. The guarantees:

- At most ``TOOL_CONCURRENCY`` calls of a turn run at once. The calls of a
  tool declared ``concurrent=False`` run one at a time, alone, after the
  turn's other calls.
- The outcomes come back in the order of the calls, whatever order the tools
  finish in.
- A call still running when its timeout passes is answered ``timed_out``. Its
  thread cannot be stopped: it is abandoned, never waited for, and runs its
  function to the end in the background; what it returns is dropped. Only the
  loop's thread writes the turn's results, so a late result is never stored.
  A timed-out ``async`` call's task is cancelled.
- ``tool_call_started`` is sent and each call's span started in the loop's
  thread, so the span is a child of the run's. The worker makes that span
  current; a worker thread also runs in a copy of the loop thread's context
  variables (a run's shared MCP connections live there).
- Once a cancellation is seen, no further call starts (each is answered
  cancelled); calls already running finish, or time out, and keep their answers.
- A worker closes the database connections it opened when its call ends.

See docs/adr/0010-concurrent-tool-calls.md for why threads, and why abandoning.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections import deque
from collections.abc import Coroutine, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import connections
from django.utils import timezone

from conversations import signals
from conversations.conf import tool_concurrency, tool_timeout
from conversations.models import Run
from conversations.models import ToolCall as ToolCallRow
from conversations.tools import Tool

from . import tracing
from .runs import CancelWatch
from .tool_calls import (
    CallOutcome,
    cancelled_call,
    execute_call,
    execute_call_async,
    timed_out_call,
)

__all__ = ["run_calls"]


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
    with _EventLoop() as loop:
        turn = _Turn(run, calls, watch, loop, default_timeout)
        turn.execute(together, limit=limit)
        for index in alone:
            turn.execute([index], limit=1)
    return [turn.outcomes[i] for i in range(len(calls))]


@dataclass(frozen=True, slots=True, eq=False)
class _Job:
    """One call on its way: where its outcome will appear and when it is due."""

    index: int
    row: ToolCallRow
    seconds: float
    started_at: datetime
    deadline: float
    """``time.monotonic()`` after which the call is answered as timed out."""
    span: tracing.ToolSpan
    future: Future[CallOutcome]
    cancel_on_timeout: bool
    """Whether the future can stop the call (an event loop task) or only be dropped (a thread)."""


class _Turn:
    """The outcomes of one turn's calls, filled by index as the calls end."""

    def __init__(
        self,
        run: Run,
        calls: Sequence[tuple[ToolCallRow, Tool]],
        watch: CancelWatch,
        loop: _EventLoop,
        default_timeout: float,
    ) -> None:
        self.run, self.calls, self.watch, self.loop = run, calls, watch, loop
        self.default_timeout = default_timeout
        self.outcomes: dict[int, CallOutcome] = {}

    def execute(self, indices: Sequence[int], *, limit: int) -> None:
        """Run the calls at ``indices``, at most ``limit`` at once, until each has an outcome."""
        waiting = deque(indices)
        running: dict[Future[CallOutcome], _Job] = {}
        try:
            while waiting or running:
                while waiting and len(running) < limit:
                    index = waiting.popleft()
                    if self.watch.cancelled():
                        self.outcomes[index] = cancelled_call(row=self.calls[index][0])
                    else:
                        job = self._start(index)
                        running[job.future] = job
                if not running:
                    break
                due = min(job.deadline for job in running.values())
                done, _ = wait(
                    running, timeout=max(due - time.monotonic(), 0), return_when=FIRST_COMPLETED
                )
                for future in done:
                    # Removed only once its result is in hand (see ``finally``).
                    self._finish(running[future], future.result())
                    del running[future]
                now = time.monotonic()
                for future, job in list(running.items()):
                    if job.deadline <= now:
                        del running[future]
                        if job.cancel_on_timeout:
                            future.cancel()
                        self._finish(job, _timed_out(job))
        finally:
            # Calls are left here only when something raised past ``Exception``
            # (a tool, a signal receiver): the loop ends the run failed, and
            # answers them as interrupted. Their spans end now.
            for job in running.values():
                job.span.finished(status=ToolCallRow.Status.INTERRUPTED, result="")

    def _start(self, index: int) -> _Job:
        row, tool = self.calls[index]
        signals.tool_call_started.send(sender=ToolCallRow, tool_call=row, run=self.run)
        span = tracing.start_tool_span(name=row.name, call_id=row.call_id, arguments=row.arguments)
        seconds = tool.timeout if tool.timeout is not None else self.default_timeout
        started_at, deadline = timezone.now(), time.monotonic() + seconds
        if tool.is_async:
            future = self.loop.submit(_call_async(self.run, row, tool, span))
        else:
            future = _call_in_thread(self.run, row, tool, span)
        return _Job(
            index=index,
            row=row,
            seconds=seconds,
            started_at=started_at,
            deadline=deadline,
            span=span,
            future=future,
            cancel_on_timeout=tool.is_async,
        )

    def _finish(self, job: _Job, outcome: CallOutcome) -> None:
        job.span.finished(status=outcome.status, result=outcome.content)
        self.outcomes[job.index] = outcome


def _timed_out(job: _Job) -> CallOutcome:
    return timed_out_call(row=job.row, seconds=job.seconds, started_at=job.started_at)


def _call_in_thread(
    run: Run, row: ToolCallRow, tool: Tool, span: tracing.ToolSpan
) -> Future[CallOutcome]:
    """Start the call in a daemon thread running in a copy of this thread's context."""
    future: Future[CallOutcome] = Future()

    def work() -> None:
        try:
            with span.current():
                outcome = execute_call(run=run, row=row, tool=tool)
        except BaseException as exc:  # past execute_call's net (SystemExit...): the loop's to judge
            _close_connections()
            future.set_exception(exc)
            return
        # Before the result is handed over: once the loop has it, the turn may end.
        _close_connections()
        future.set_result(outcome)

    context = contextvars.copy_context()
    name = f"conversations-tool-{row.call_id}"
    threading.Thread(target=context.run, args=(work,), name=name, daemon=True).start()
    return future


def _close_connections() -> None:
    """Close the database connections this thread opened (a worker's, never the loop's)."""
    connections.close_all()


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
    """One event loop in a daemon thread, started by the first async call of the turn.

    At the end of the turn it is told to stop and is not waited for: tasks
    cancelled at their timeout unwind there, and a task that does not let go
    keeps only that thread.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def submit(self, coroutine: Coroutine[Any, Any, CallOutcome]) -> Future[CallOutcome]:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(
                target=_serve, args=(self._loop,), name="conversations-tools-loop", daemon=True
            ).start()
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
