"""An inline run executed by a thread of the process (``submit_message(background=True)``).

The request that starts it returns at once; the thread executes the run after
the commit. Whatever happens in that thread, the run ends: an error the loop
never got to record ends it ``failed`` rather than leaving it ``running``
until its lease expires.
"""

from __future__ import annotations

import threading

import pytest

from conversations.models import Run
from conversations.services.loop import executors
from conversations.services.loop.executors import submit_message

pytestmark = pytest.mark.django_db(transaction=True)


def join_run_threads() -> None:
    for thread in threading.enumerate():
        if thread.name.startswith("conversations-run-"):
            thread.join(20)
            assert not thread.is_alive()


def test_a_background_run_is_executed_after_the_commit(demo_conversation):
    run = submit_message(conversation=demo_conversation, content="hello", background=True)
    join_run_threads()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert run.final_content


def test_an_error_before_the_loop_records_it_ends_the_run_failed(demo_conversation, monkeypatch):
    # The thread shares the returned run: it fails only once the test has seen it running.
    seen_running = threading.Event()

    def broken(*, run, provider):
        assert seen_running.wait(20)
        raise RuntimeError("connection string postgres://admin:hunter2@db")

    monkeypatch.setattr(executors, "execute_run", broken)
    run = submit_message(conversation=demo_conversation, content="hello", background=True)
    assert run.status == Run.Status.RUNNING
    seen_running.set()
    join_run_threads()
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error_code == "internal_error"
    # The exception's type is recorded, never its text (it may hold a secret).
    assert run.error_message == "RuntimeError"
    assert run.finished_at is not None


def test_a_run_the_loop_already_ended_is_left_as_it_is(demo_conversation, monkeypatch):
    real = executors.execute_run

    def ends_then_raises(*, run, provider):
        real(run=run, provider=provider)
        raise RuntimeError("after the end")

    monkeypatch.setattr(executors, "execute_run", ends_then_raises)
    run = submit_message(conversation=demo_conversation, content="hello", background=True)
    join_run_threads()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert run.error_code == ""
