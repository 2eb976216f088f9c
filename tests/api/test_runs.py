"""Runs: the list of a conversation and one run, with usage and the calls made."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from conversations.domain.timing import duration_ms
from conversations.models import Run
from conversations.services.loop import claim_run

from .conftest import scripted_turn

pytestmark = pytest.mark.django_db


def runs_url(demo_conversation):
    return reverse("conversations:conversation-runs", args=[demo_conversation.pk])


def run_url(run):
    return reverse("conversations:run-detail", args=[run.pk])


def test_run_detail_has_every_field(api, history, demo_conversation):
    response = api.get(run_url(history))
    assert response.status_code == 200
    body = response.json()
    history.refresh_from_db()
    assert body["id"] == str(history.pk) and body["conversation"] == str(demo_conversation.pk)
    assert body["profile"] == "demo"
    assert body["status"] == body["termination_reason"] == "completed"
    assert body["iterations"] == 2 and body["max_iterations"] == 4
    assert body["usage"] == {
        "prompt_tokens": 60,
        "completion_tokens": 17,
        "total_tokens": 77,
        "cached_prompt_tokens": 4,
        "reasoning_tokens": 3,
        "estimated": False,
    }
    assert body["provider"] == "demo" and body["model"] == "demo-model"
    assert body["finished_at"] is not None
    assert body["duration_ms"] == duration_ms(history.started_at, history.finished_at)
    assert body["error_code"] == "" and body["error_message"] == ""
    assert body["final_content"] == "Paris: light rain; 6*7 = 42."
    assert [(c["name"], c["arguments"], c["status"]) for c in body["tool_calls"]] == [
        ("get_weather", {"city": "Paris"}, "succeeded"),
        ("calculate", {"expression": "6*7"}, "succeeded"),
    ]


def test_a_running_run_has_no_duration_yet(api, running_run):
    body = api.get(run_url(running_run)).json()
    assert body["status"] == "running" and body["finished_at"] is None
    assert body["duration_ms"] is None and body["tool_calls"] == []
    assert body["profile"] is None


def test_a_duration_is_rounded_to_the_nearest_millisecond_a_half_up(api, history):
    Run.objects.filter(pk=history.pk).update(
        finished_at=history.started_at + timedelta(microseconds=2_500)
    )
    assert api.get(run_url(history)).json()["duration_ms"] == 3


def test_runs_are_listed_newest_first(api, demo_conversation):
    first = scripted_turn(demo_conversation, content="one")
    second = scripted_turn(demo_conversation, content="two")
    body = api.get(runs_url(demo_conversation)).json()
    assert [r["id"] for r in body["results"]] == [str(second.pk), str(first.pk)]
    assert body["next"] is None


def test_runs_page_with_a_cursor(api, demo_conversation):
    made = [str(scripted_turn(demo_conversation, content=f"m{i}").pk) for i in range(5)]
    seen, url = [], runs_url(demo_conversation) + "?page_size=2"
    while url:
        body = api.get(url).json()
        seen += [r["id"] for r in body["results"]]
        url = body["next"]
    assert seen == made[::-1]


@pytest.mark.parametrize("count", [2, 12])
def test_run_list_queries_do_not_grow(api, demo_conversation, count, django_assert_max_num_queries):
    for index in range(count):
        scripted_turn(demo_conversation, content=f"turn {index}")
    # Constant whatever the number of runs (one of the queries reads their child runs).
    with django_assert_max_num_queries(5):
        response = api.get(runs_url(demo_conversation), {"page_size": 100})
    runs = response.json()["results"]
    assert len(runs) == count and all(len(r["tool_calls"]) == 2 for r in runs)


def test_a_failed_run_shows_its_error(api, demo_conversation):
    run = Run.objects.create(
        conversation=demo_conversation,
        status=Run.Status.FAILED,
        max_iterations=2,
        error_code="provider_http_error",
        error_message="openai: HTTP 400: bad request",
    )
    body = api.get(run_url(run)).json()
    assert body["status"] == "failed"
    assert body["error_code"] == "provider_http_error"
    assert body["error_message"] == "openai: HTTP 400: bad request"


def test_a_run_no_process_took_yet_is_queued(api, running_run):
    body = api.get(run_url(running_run)).json()
    assert body["queued"] is True and body["claimed_at"] is None


def test_a_claimed_run_is_not_queued(api, running_run):
    assert claim_run(run=running_run)
    claimed = api.get(run_url(running_run)).json()
    assert claimed["queued"] is False and claimed["claimed_at"] is not None


def test_an_ended_run_is_not_queued_even_unclaimed(api, demo_conversation):
    run = Run.objects.create(
        conversation=demo_conversation, status=Run.Status.CANCELLED, max_iterations=2
    )
    body = api.get(run_url(run)).json()
    assert body["queued"] is False and body["claimed_at"] is None


def test_runs_filtered_by_status(api, demo_conversation):
    made = {
        status: Run.objects.create(
            conversation=demo_conversation, status=status, max_iterations=2
        ).pk
        for status in (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)
    }
    body = api.get(runs_url(demo_conversation), {"status": "failed, cancelled"}).json()
    assert {r["id"] for r in body["results"]} == {
        str(made[Run.Status.FAILED]),
        str(made[Run.Status.CANCELLED]),
    }
    everything = api.get(runs_url(demo_conversation)).json()["results"]
    assert len(everything) == 3


@pytest.mark.parametrize("value", ["finished", "failed,nope", ","])
def test_an_unknown_status_filter_is_a_clear_400(api, demo_conversation, value):
    response = api.get(runs_url(demo_conversation), {"status": value})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert [item["parameter"] for item in body["errors"]] == ["status"]
    assert "valid statuses: running, completed" in body["errors"][0]["detail"]
