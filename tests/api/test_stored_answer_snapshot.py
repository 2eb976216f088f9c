"""An answer's in-flight snapshot never follows its stored turn on the run's event stream.

The loop forgets the snapshot (a cache key) and stores the turn (a commit).
A stream reads the rows, then the snapshot. Were the snapshot forgotten only
after the commit, a stream opening in between would send the stored turn and
then the snapshot of that same answer: a client would show it twice.

The test forces that moment: the loop is held where it forgets the snapshot
(``snapshot_hook``) until the stream has opened.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections

from conversations import events
from conversations.api.sse.stream import RunEventStream
from conversations.domain import TextDelta
from conversations.providers.scripted import ScriptedProvider, scripted_stream, scripted_text
from conversations.services import execute_run
from conversations.services.loop.runs import start_run

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 30.0
"""The longest one thread waits for the other (never reached unless something is broken)."""


class NotifiedOnly(RunEventStream):
    """Reads the rows when ``changed`` says so, never on a timer (nothing here waits on time)."""

    poll_seconds = 3600.0
    keepalive_seconds = 3600.0


def test_a_stream_opening_while_the_answer_is_stored_never_sends_its_snapshot_after_it(
    demo_conversation, profile, snapshot_hook
):
    profile.stream = True
    profile.save(update_fields=["stream"])
    answer = scripted_stream(
        TextDelta("It is "), TextDelta("sunny."), scripted_text("It is sunny.")
    )
    run = start_run(conversation=demo_conversation, content="Weather?", provider=ScriptedProvider())
    reached, release = threading.Event(), threading.Event()

    def hold() -> None:  # in the loop's thread
        reached.set()
        assert release.wait(WAIT), "the test never let the loop go on"

    snapshot_hook(run.pk, hold)
    failures: list[BaseException] = []

    def execute() -> None:
        try:
            execute_run(run=run, provider=ScriptedProvider([answer]))
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)
        finally:
            connections.close_all()

    worker = threading.Thread(target=execute)
    worker.start()
    received: list[Any] = []
    try:
        assert reached.wait(WAIT), "the loop never forgot the snapshot"
        assert events.inflight(run.pk) is not None  # the answer has streamed
        stream = NotifiedOnly(run.pk)
        batches = stream.follow(stream.poll())
        received += next(batches)  # what was stored before: run_started
        received += next(batches)  # the opening: the rows again, then the snapshot
        release.set()
        for batch in batches:
            received += batch
    finally:
        release.set()
        worker.join(WAIT)
    assert not failures, failures
    kinds = [event.type for event in received]
    assert kinds[-1] == "run_finished"
    stored = kinds.index("assistant_turn")
    assert "inflight" not in kinds[stored:], kinds
    assert kinds.count("assistant_turn") == 1
