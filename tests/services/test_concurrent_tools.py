"""The calls of one turn run concurrently: overlap, order, bounds, async tools, timeouts, cancel.

Overlap is judged by the start and finish times each tool records itself
(``time.monotonic()`` inside the tool), never by how long the run took.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS, connections

from conversations.domain import Role, ToolCall
from conversations.exceptions import ConfigurationError
from conversations.models import Message, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import run_tool_loop
from conversations.services.loop.runs import CANCEL_CHECK_INTERVAL, cancel_run
from conversations.tools import ToolContext, ToolError, registry, tool
from tests.providers.replay import assert_every_adapter_accepts

pytestmark = pytest.mark.django_db

NAP = 0.3
WAIT = 10.0
"""Longest a tool waits for another's event before the test is failed (never reached when it works)."""


@dataclass
class Clock:
    """What the tools record about themselves: each call's interval, in finishing order."""

    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    running: int = 0
    peak: int = 0

    def enter(self) -> float:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        return time.monotonic()

    def leave(self, label: str, started: float) -> None:
        ended = time.monotonic()
        with self.lock:
            self.running -= 1
            self.intervals[label] = (started, ended)
            self.finished.append(label)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def tools(clock):
    """``nap`` sleeps (a thread), ``anap`` awaits a sleep (the event loop), ``alone`` runs alone."""
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def nap(label: str, seconds: float = NAP) -> str:
            """Sleep a while."""
            started = clock.enter()
            time.sleep(seconds)
            clock.leave(label, started)
            return f"slept {label}"

        @tool(registry=r)
        async def anap(label: str, seconds: float = NAP) -> str:
            """Await a sleep."""
            started = clock.enter()
            await asyncio.sleep(seconds)
            clock.leave(label, started)
            return f"awaited {label}"

        @tool(registry=r, concurrent=False)
        def alone(label: str) -> str:
            """Must not run alongside anything."""
            started = clock.enter()
            time.sleep(NAP / 2)
            clock.leave(label, started)
            return f"alone {label}"

        yield r


def calls(*specs):
    """``(name, label, extra arguments)`` → tool calls with ids ``c_<label>``."""
    return [
        ToolCall(id=f"c_{label}", name=name, arguments={"label": label, **extra})
        for name, label, *rest in specs
        for extra in [rest[0] if rest else {}]
    ]


def run_turn(conversation, *specs):
    provider = ScriptedProvider([scripted_calls(*calls(*specs)), scripted_text("done")])
    return run_tool_loop(conversation=conversation, content="go", provider=provider)


def results(conversation):
    """The tool messages of the conversation, in stored order: (call id, content, is_error)."""
    return [
        (m.tool_call_id, m.content, m.is_error)
        for m in get_history(conversation=conversation)
        if m.role is Role.TOOL
    ]


def statuses(run):
    rows = ToolCallRow.objects.filter(message__run=run).order_by("index")
    return {row.call_id: row.status for row in rows}


def overlap(a, b):
    return a[0] < b[1] and b[0] < a[1]


def test_five_sleeping_tools_of_one_turn_overlap(conversation, tools, clock):
    labels = ["a", "b", "c", "d", "e"]
    run = run_turn(conversation, *[("nap", label) for label in labels])
    assert run.status == Run.Status.COMPLETED
    spans = [clock.intervals[label] for label in labels]
    # Every call started before any of them finished: all five ran at once.
    assert max(start for start, _ in spans) < min(end for _, end in spans)
    assert results(conversation) == [(f"c_{x}", f"slept {x}", False) for x in labels]
    assert set(statuses(run).values()) == {ToolCallRow.Status.SUCCEEDED}


def test_results_are_stored_in_call_order_when_the_calls_finish_in_reverse(conversation, clock):
    steps = [threading.Event() for _ in range(4)]
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def step(n: int) -> str:
            """Finish only after the call with the next number has finished."""
            started = clock.enter()
            if n + 1 < len(steps):
                assert steps[n + 1].wait(WAIT), "the calls did not run at the same time"
            clock.leave(str(n), started)
            steps[n].set()
            return f"step {n}"

        provider = ScriptedProvider(
            [
                scripted_calls(
                    *[ToolCall(id=f"c{n}", name="step", arguments={"n": n}) for n in range(4)]
                ),
                scripted_text("done"),
            ]
        )
        run = run_tool_loop(conversation=conversation, content="go", provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert clock.finished == ["3", "2", "1", "0"]
    assert results(conversation) == [(f"c{n}", f"step {n}", False) for n in range(4)]
    stored = Message.objects.filter(conversation=conversation, role="tool").order_by("position")
    assert [m.tool_call.call_id for m in stored] == ["c0", "c1", "c2", "c3"]


def test_a_tool_that_is_not_concurrent_runs_after_the_others_and_alone(conversation, tools, clock):
    run = run_turn(
        conversation,
        ("alone", "first"),
        ("nap", "x"),
        ("nap", "y"),
        ("alone", "second"),
        ("anap", "z"),
    )
    assert run.status == Run.Status.COMPLETED
    others = [clock.intervals[label] for label in ("x", "y", "z")]
    first, second = clock.intervals["first"], clock.intervals["second"]
    for lone in (first, second):
        assert not any(overlap(lone, other) for other in others)
        assert lone[0] >= max(end for _, end in others)
    assert not overlap(first, second) and first[1] <= second[0]  # one at a time, in call order
    assert max(s for s, _ in others) < min(e for _, e in others)  # the others did overlap
    assert [call_id for call_id, _, _ in results(conversation)] == [
        "c_first",
        "c_x",
        "c_y",
        "c_second",
        "c_z",
    ]


def test_tool_concurrency_bounds_how_many_calls_run_at_once(conversation, tools, clock, settings):
    settings.CONVERSATIONS = {"TOOL_CONCURRENCY": 2}
    labels = ["a", "b", "c", "d", "e"]
    run = run_turn(conversation, *[("nap", label, {"seconds": 0.2}) for label in labels])
    assert run.status == Run.Status.COMPLETED
    assert clock.peak == 2
    spans = sorted(clock.intervals[label] for label in labels)
    # Never three at once: each call overlaps at most one of those that started before it.
    for i, current in enumerate(spans):
        assert sum(overlap(current, earlier) for earlier in spans[:i]) <= 1
    assert len(results(conversation)) == 5


def test_an_async_tool_is_awaited_and_answered(conversation, tools, clock):
    run = run_turn(conversation, ("anap", "only", {"seconds": 0.01}))
    assert run.status == Run.Status.COMPLETED
    assert results(conversation) == [("c_only", "awaited only", False)]
    assert statuses(run) == {"c_only": ToolCallRow.Status.SUCCEEDED}


def test_two_async_tools_overlap_and_an_async_and_a_sync_tool_too(conversation, tools, clock):
    run = run_turn(conversation, ("anap", "a"), ("anap", "b"), ("nap", "c"))
    assert run.status == Run.Status.COMPLETED
    a, b, c = (clock.intervals[label] for label in "abc")
    assert overlap(a, b) and overlap(a, c) and overlap(b, c)
    assert [content for _, content, _ in results(conversation)] == [
        "awaited a",
        "awaited b",
        "slept c",
    ]


def snapshot(conversation):
    """Every stored row of the conversation: messages, calls, runs."""
    return (
        list(Message.objects.filter(conversation=conversation).order_by("position").values()),
        list(ToolCallRow.objects.filter(conversation=conversation).order_by("pk").values()),
        list(Run.objects.filter(conversation=conversation).values()),
    )


def test_a_call_past_its_timeout_is_answered_timed_out_and_its_late_result_dropped(conversation):
    release, threads, finished = threading.Event(), [], []
    with registry.isolated(empty=True) as r:

        @tool(registry=r, timeout=0.2)
        def stuck() -> str:
            """Returns only once the test lets it, long after its timeout."""
            threads.append(threading.current_thread())
            release.wait(WAIT)
            finished.append("stuck")
            return "late result"

        @tool(registry=r)
        def quick() -> str:
            """Answers at once."""
            return "on time"

        provider = ScriptedProvider(
            [
                scripted_calls(("stuck", {}), ToolCall(id="c_quick", name="quick", arguments={})),
                scripted_text("done"),
            ]
        )
        run = run_tool_loop(conversation=conversation, content="go", provider=provider)
        # The loop did not wait for the tool: it is still running now.
        assert finished == [] and threads[0].is_alive()
        stored = snapshot(conversation)
        release.set()
        threads[0].join(WAIT)
    assert finished == ["stuck"]  # the function itself ran to its end, in the background
    assert snapshot(conversation) == stored  # and nothing was written after the run
    assert run.status == Run.Status.COMPLETED
    assert [(content, is_error) for _, content, is_error in results(conversation)] == [
        ('Error: tool "stuck" timed out after 0.2 s.', True),
        ("on time", False),
    ]
    row = ToolCallRow.objects.get(name="stuck")
    assert row.status == ToolCallRow.Status.TIMED_OUT
    assert row.started_at is not None and row.finished_at is not None
    assert "abandoned" in row.error
    # The model was told, in the request after the turn.
    told = [m.content for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert told[0] == 'Error: tool "stuck" timed out after 0.2 s.'
    assert not any("late result" in str(values) for values in snapshot(conversation))


def test_the_timeout_setting_applies_to_tools_without_their_own(conversation, settings):
    settings.CONVERSATIONS = {"TOOL_TIMEOUT_SECONDS": 0.25}
    cancelled = threading.Event()
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        async def forever() -> str:
            """Awaits far longer than allowed; the task is cancelled at the timeout."""
            try:
                await asyncio.sleep(WAIT)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "never"

        provider = ScriptedProvider([scripted_calls(("forever", {})), scripted_text("done")])
        run = run_tool_loop(conversation=conversation, content="go", provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert results(conversation)[0][1:] == ('Error: tool "forever" timed out after 0.25 s.', True)
    assert ToolCallRow.objects.get(name="forever").status == ToolCallRow.Status.TIMED_OUT
    assert cancelled.wait(WAIT)  # an async call can be stopped, and is


def test_exception_text_never_reaches_the_model_from_a_thread_or_the_event_loop(conversation):
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def boom() -> str:
            """Fails with a secret in the message."""
            raise RuntimeError("SECRET-sync-123")

        @tool(registry=r)
        async def aboom() -> str:
            """Fails with a secret in the message, asynchronously."""
            raise RuntimeError("SECRET-async-456")

        @tool(registry=r)
        async def refuse() -> str:
            """Refuses with a message meant for the model."""
            raise ToolError("no such city")

        provider = ScriptedProvider(
            [scripted_calls(("boom", {}), ("aboom", {}), ("refuse", {})), scripted_text("done")]
        )
        run = run_tool_loop(conversation=conversation, content="go", provider=provider)
    assert [content for _, content, _ in results(conversation)] == [
        'Error: tool "boom" failed.',
        'Error: tool "aboom" failed.',
        'Error: tool "refuse" failed: no such city',
    ]
    rows = {row.name: row for row in ToolCallRow.objects.filter(message__run=run)}
    assert "SECRET-sync-123" in rows["boom"].error  # admins keep the traceback
    assert "SECRET-async-456" in rows["aboom"].error
    assert {row.status for row in rows.values()} == {ToolCallRow.Status.FAILED}


def test_unusable_concurrency_settings_fail_the_run_naming_the_key(conversation, tools, settings):
    settings.CONVERSATIONS = {"TOOL_CONCURRENCY": 0}
    provider = ScriptedProvider([scripted_calls(*calls(("nap", "a"))), scripted_text("done")])
    with pytest.raises(ConfigurationError, match=r"CONVERSATIONS\['TOOL_CONCURRENCY'\]"):
        run_tool_loop(conversation=conversation, content="go", provider=provider)
    run = Run.objects.get(conversation=conversation)
    assert (run.status, run.error_code) == (Run.Status.FAILED, "configuration_error")
    assert "TOOL_CONCURRENCY" in run.error_message
    assert_every_adapter_accepts(get_history(conversation=conversation))


@pytest.mark.django_db(transaction=True)
def test_a_cancel_during_concurrent_calls_stops_the_calls_not_yet_started(
    conversation, tools, clock, settings
):
    settings.CONVERSATIONS = {"TOOL_CONCURRENCY": 2}
    with registry.isolated() as r:

        @tool(registry=r)
        def cancel_me(context: ToolContext) -> str:
            """Cancel the run this call belongs to, as another request would, then work on."""
            cancel_run(run=Run.objects.get(pk=context.run_id))
            # Long enough for the loop's next look at the flag.
            time.sleep(CANCEL_CHECK_INTERVAL + 0.1)
            return "asked to stop"

        provider = ScriptedProvider(
            [
                scripted_calls(
                    ToolCall(id="c_cancel", name="cancel_me", arguments={}),
                    # Still running when the cancelling call ends and frees its slot.
                    *calls(("nap", "running", {"seconds": CANCEL_CHECK_INTERVAL + 0.4})),
                    *calls(("nap", "waiting"), ("anap", "waiting_too")),
                ),
                scripted_text("never asked"),
            ]
        )
        run = run_tool_loop(conversation=conversation, content="go", provider=provider)
    assert run.status == Run.Status.CANCELLED and run.error_code == "run_cancelled"
    assert len(provider.requests) == 1
    assert list(clock.intervals) == ["running"]  # the two waiting calls never started
    assert statuses(run) == {
        "c_cancel": ToolCallRow.Status.SUCCEEDED,
        "c_running": ToolCallRow.Status.SUCCEEDED,
        "c_waiting": ToolCallRow.Status.CANCELLED,
        "c_waiting_too": ToolCallRow.Status.CANCELLED,
    }
    assert [content for _, content, _ in results(conversation)] == [
        "asked to stop",
        "slept running",
        'Error: tool "nap" was cancelled and did not complete.',
        'Error: tool "anap" was cancelled and did not complete.',
    ]
    assert_every_adapter_accepts(get_history(conversation=conversation))


@pytest.mark.django_db(transaction=True)
def test_worker_threads_close_the_database_connections_they_opened(conversation):
    """Each worker's own connection (a thread-local wrapper) is closed when its call ends."""
    wrappers, spies = [], []

    def watch_this_threads_connection():
        wrapper = connections[DEFAULT_DB_ALIAS]
        wrapper.ensure_connection()
        wrappers.append(wrapper)
        spies.append(mock.patch.object(wrapper, "close", wraps=wrapper.close).start())

    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def count_runs(context: ToolContext) -> int:
            """Reads the database from a worker thread."""
            watch_this_threads_connection()
            return Run.objects.filter(pk=context.run_id).count()

        @tool(registry=r)
        async def acount_runs(context: ToolContext) -> int:
            """Reads the database through the async ORM."""
            count = await Run.objects.filter(pk=context.run_id).acount()
            await sync_to_async(watch_this_threads_connection)()
            return count

        provider = ScriptedProvider(
            [scripted_calls(("count_runs", {}), ("acount_runs", {})), scripted_text("done")]
        )
        run = run_tool_loop(conversation=conversation, content="go", provider=provider)
    try:
        assert run.status == Run.Status.COMPLETED
        assert [content for _, content, _ in results(conversation)] == ["1", "1"]
        assert len(wrappers) == 2
        assert all(wrapper is not connections[DEFAULT_DB_ALIAS] for wrapper in wrappers)
        for spy in spies:
            spy.assert_called()
        if connections[DEFAULT_DB_ALIAS].vendor == "postgresql":
            # (SQLite ignores closing its in-memory test database: the spies are the evidence.)
            assert all(wrapper.connection is None for wrapper in wrappers)
    finally:
        mock.patch.stopall()


class Abort(BaseException):
    """Not an ``Exception``: the loop does not answer it as a failed tool."""


def test_a_tool_raising_past_exception_fails_the_run_and_the_others_are_interrupted(
    conversation,
):
    release = threading.Event()
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def abort() -> str:
            """Raises what no tool answer covers."""
            raise Abort("stop everything")

        @tool(registry=r)
        def busy() -> str:
            """Still running when the run fails."""
            release.wait(WAIT)
            return "too late"

        provider = ScriptedProvider(
            [scripted_calls(("abort", {}), ("busy", {})), scripted_text("never asked")]
        )
        try:
            with pytest.raises(Abort):
                run_tool_loop(conversation=conversation, content="go", provider=provider)
        finally:
            release.set()
    run = Run.objects.get(conversation=conversation)
    assert (run.status, run.error_code) == (Run.Status.FAILED, "internal_error")
    assert set(ToolCallRow.objects.values_list("status", flat=True)) == {
        ToolCallRow.Status.INTERRUPTED
    }
    assert_every_adapter_accepts(get_history(conversation=conversation))
