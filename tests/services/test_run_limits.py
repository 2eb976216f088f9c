"""At most ``MAX_RUNS_PER_USER`` running runs per user, and no pooled connection held while tools run."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from conversations.exceptions import TooManyRuns
from conversations.models import Conversation, Message, Run
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop, start_run
from conversations.services.loop.heartbeat import Heartbeat
from conversations.tools import registry, tool

WAIT = 10.0
"""Longest a thread waits for another's event before the test fails (never reached when it works)."""


def conversations_of(user, count):
    return [Conversation.objects.create(owner=user, title=f"c{i}") for i in range(count)]


@pytest.mark.django_db
def test_a_run_beyond_the_users_limit_is_refused_before_anything_is_stored(
    settings, user, other_user, profile
):
    settings.CONVERSATIONS = {"MAX_RUNS_PER_USER": 2}
    first, second, third = conversations_of(user, 3)
    start_run(conversation=first, content="one", profile=profile)
    start_run(conversation=second, content="two", profile=profile)

    with pytest.raises(TooManyRuns) as caught:
        start_run(conversation=third, content="three", profile=profile)

    assert caught.value.code == "too_many_runs"
    assert caught.value.limit == 2
    assert "At most 2 runs" in caught.value.detail
    assert not Run.objects.filter(conversation=third).exists()
    assert not Message.objects.filter(conversation=third).exists()
    # Another user's runs are counted apart.
    mine = Conversation.objects.create(owner=other_user, title="mine")
    assert start_run(conversation=mine, content="hi", profile=profile).status == "running"


@pytest.mark.django_db
def test_runs_that_ended_or_wait_for_an_approval_leave_their_place_free(settings, user, profile):
    settings.CONVERSATIONS = {"MAX_RUNS_PER_USER": 1}
    first, second, third = conversations_of(user, 3)
    run = start_run(conversation=first, content="one", profile=profile)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    run = start_run(conversation=second, content="two", profile=profile)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.AWAITING_APPROVAL)

    assert start_run(conversation=third, content="three", profile=profile).status == "running"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_requests_of_one_user_never_both_take_the_last_place(settings, user, profile):
    settings.CONVERSATIONS = {"MAX_RUNS_PER_USER": 1}
    first, second = conversations_of(user, 2)
    inserted, commit = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def holder():
        # Starts a run and keeps its transaction open: its place is taken but not yet committed.
        try:
            with transaction.atomic():
                start_run(conversation=first, content="one", profile=profile)
                inserted.set()
                commit.wait(WAIT)
        finally:
            connection.close()

    def contender():
        try:
            outcome["run"] = start_run(conversation=second, content="two", profile=profile)
        except TooManyRuns as exc:
            outcome["error"] = exc
        finally:
            connection.close()

    holding = threading.Thread(target=holder)
    holding.start()
    assert inserted.wait(WAIT)
    contending = threading.Thread(target=contender)
    contending.start()
    # The contender either waits for the holder's lock (the fix) or has already
    # seen no running run and inserted its own (no lock): only then go on.
    while contending.is_alive() and not _waiting_for_a_lock():
        contending.join(0.01)
    commit.set()
    holding.join(WAIT)
    contending.join(WAIT)

    assert isinstance(outcome.get("error"), TooManyRuns), outcome
    assert Run.objects.filter(conversation__owner=user, status="running").count() == 1


@pytest.fixture
def patient_pool(small_pool):
    """The pool of one connection, waiting up to ``WAIT`` for it: only a connection kept fails."""
    connections.close_all()
    connection.close_pool()
    connection.settings_dict["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 1, "timeout": WAIT}


def _waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return bool(cursor.fetchone()[0])


@pytest.mark.postgres
def test_a_slow_tool_keeps_no_pooled_connection_checked_out(patient_pool, user, profile):
    conversation = Conversation.objects.create(owner=user, title="slow", profile=profile)
    started, release = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}
    connections.close_all()  # the pool's one connection is free for the run

    with registry.isolated(empty=True) as tools:

        @tool(registry=tools)
        def slow() -> str:
            """Wait until the test lets it finish."""
            started.set()
            release.wait(WAIT)
            return "done"

        provider = ScriptedProvider([scripted_calls(("slow", {})), scripted_text("ok")])

        def run():
            try:
                outcome["run"] = run_tool_loop(
                    conversation=conversation, content="go", provider=provider
                )
            finally:
                connections.close_all()

        running = threading.Thread(target=run)
        running.start()
        try:
            assert started.wait(WAIT)
            # The pool has one connection: this query gets it only if the run gave it back
            # (else it waits for the pool's timeout and fails).
            seen = Run.objects.filter(conversation=conversation).values_list("status", flat=True)
            assert list(seen) == ["running"]
            connections.close_all()
        finally:
            release.set()
            running.join(WAIT)

    assert outcome["run"].status == "completed"


@pytest.mark.postgres
def test_the_heartbeat_gives_its_connection_back_between_beats(patient_pool, user, profile):
    conversation = Conversation.objects.create(owner=user, title="beat", profile=profile)
    run = start_run(conversation=conversation, content="go", profile=profile)
    connections.close_all()
    before = Run.objects.get(pk=run.pk).heartbeat_at
    connections.close_all()

    with Heartbeat(run, interval=0.05):
        # Each beat takes the pool's one connection; between beats it is free for this thread.
        beats = 0
        while beats < 3:
            beat = Run.objects.get(pk=run.pk).heartbeat_at
            connections.close_all()
            if beat != before:
                beats, before = beats + 1, beat

    assert before is not None
