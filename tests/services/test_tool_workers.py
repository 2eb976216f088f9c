"""The tool runner's worker threads: reused, never waited for when busy, bounded when idle.

The pool is tested on instances of its own (the process's pool is shared by
every test), and through the loop for what a run relies on. Waits are bounded
(``WAIT``) and never reached when the code works; no time is asserted.
"""

from __future__ import annotations

import os
import threading
import time
from unittest import mock

import pytest
from django.db import DEFAULT_DB_ALIAS, connections

from conversations.domain import Role, ToolCall
from conversations.models import Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import run_tool_loop
from conversations.services.loop.tool_runner import _Workers
from conversations.tools import ToolContext, registry, tool

WAIT = 10.0


def eventually(predicate) -> bool:
    """Whether ``predicate()`` becomes true within ``WAIT`` seconds."""
    give_up = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > give_up:
            return False
        time.sleep(0.005)
    return True


def answers(conversation) -> list[str]:
    """The tool messages' contents, in stored order."""
    return [m.content for m in get_history(conversation=conversation) if m.role is Role.TOOL]


def recording(threads: list[threading.Thread], done: threading.Event | None = None):
    """A job that records the thread it ran in (and sets ``done``)."""

    def job() -> None:
        threads.append(threading.current_thread())
        if done is not None:
            done.set()

    return job


def test_a_worker_that_finished_takes_the_next_job():
    pool, threads = _Workers(), []
    pool.submit(recording(threads), keep=1)
    assert eventually(lambda: pool.idle == 1)
    pool.submit(recording(threads), keep=1)
    assert eventually(lambda: len(threads) == 2)
    assert threads[0] is threads[1]
    assert threads[0].daemon  # a hung tool never holds up the process's exit


def test_a_busy_worker_never_delays_the_next_job():
    pool, release, threads, done = _Workers(), threading.Event(), [], threading.Event()

    def stuck() -> None:
        threads.append(threading.current_thread())
        release.wait(WAIT)

    try:
        pool.submit(stuck, keep=1)
        pool.submit(recording(threads, done), keep=1)
        # The second job ran while the first still held its worker: another thread.
        assert done.wait(WAIT)
        assert not release.is_set()
        assert threads[0] is not threads[1]
    finally:
        release.set()


def test_idle_workers_are_bounded_by_keep_and_the_others_end():
    pool, release, threads = _Workers(), threading.Event(), []

    def blocked() -> None:
        threads.append(threading.current_thread())
        release.wait(WAIT)

    for _ in range(5):
        pool.submit(blocked, keep=2)
    assert eventually(lambda: len(threads) == 5)
    assert len(set(threads)) == 5 and pool.idle == 0
    release.set()
    assert eventually(lambda: sum(thread.is_alive() for thread in threads) == 2)
    assert pool.idle == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_with_an_empty_pool_that_works():
    """A prefork worker inherits the pool's counts but not its threads."""
    pool = _Workers()
    pool.submit(lambda: None, keep=1)
    assert eventually(lambda: pool.idle == 1)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        status = b"idle workers inherited"
        try:
            if pool.idle == 0:
                ran = threading.Event()
                pool.submit(ran.set, keep=1)
                status = b"ok" if ran.wait(WAIT) else b"the job never ran"
        finally:
            os.write(write, status)
            os._exit(0)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as pipe:
            reported = pipe.read()
    finally:
        os.waitpid(child, 0)
    assert reported == b"ok"
    assert pool.idle == 1  # the parent's pool is untouched


@pytest.mark.django_db
def test_a_call_after_an_abandoned_one_runs_while_the_abandoned_one_still_hangs(
    conversation, settings
):
    """One call at a time, the first abandoned at its timeout: the second gets a thread."""
    settings.CONVERSATIONS = {"TOOL_CONCURRENCY": 1}
    release = threading.Event()
    with registry.isolated(empty=True) as r:

        @tool(registry=r, timeout=0.2)
        def stuck() -> str:
            """Hangs until the test lets it go."""
            release.wait(WAIT)
            return "late"

        @tool(registry=r)
        def quick() -> str:
            """Answers at once."""
            return "on time"

        provider = ScriptedProvider(
            [
                scripted_calls(
                    ToolCall(id="c_stuck", name="stuck", arguments={}),
                    ToolCall(id="c_quick", name="quick", arguments={}),
                ),
                scripted_text("done"),
            ]
        )
        try:
            run = run_tool_loop(conversation=conversation, content="go", provider=provider)
            assert not release.is_set()  # the stuck call still hangs in its worker
        finally:
            release.set()
    assert run.status == Run.Status.COMPLETED
    assert answers(conversation) == ['Error: tool "stuck" timed out after 0.2 s.', "on time"]
    statuses = dict(ToolCallRow.objects.values_list("call_id", "status"))
    assert statuses == {"c_stuck": ToolCallRow.Status.TIMED_OUT, "c_quick": "succeeded"}


@pytest.mark.django_db(transaction=True)
def test_workers_close_their_connection_after_every_call_across_turns(conversation, settings):
    """A worker that lives on opens a connection for a call and closes it when the call ends."""
    settings.CONVERSATIONS = {"TOOL_CONCURRENCY": 1}
    spies = []

    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def count_runs(context: ToolContext) -> int:
            """Reads the database from a worker thread, and notes that thread's connection."""
            count = Run.objects.filter(pk=context.run_id).count()
            wrapper = connections[DEFAULT_DB_ALIAS]
            spy = mock.patch.object(wrapper, "close", wraps=wrapper.close).start()
            spies.append((wrapper, spy))
            return count

        try:
            for turn in range(3):
                provider = ScriptedProvider(
                    [
                        scripted_calls(ToolCall(id=f"c{turn}", name="count_runs", arguments={})),
                        scripted_text("done"),
                    ]
                )
                run = run_tool_loop(conversation=conversation, content="go", provider=provider)
                assert run.status == Run.Status.COMPLETED
                wrapper, spy = spies[-1]
                assert wrapper is not connections[DEFAULT_DB_ALIAS]
                spy.assert_called()
                if wrapper.vendor == "postgresql":
                    # (SQLite ignores closing its in-memory test database.)
                    assert wrapper.connection is None
        finally:
            mock.patch.stopall()
    assert answers(conversation) == ["1", "1", "1"]
