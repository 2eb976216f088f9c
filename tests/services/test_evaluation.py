"""Evaluations: a dataset replayed on two profiles, scored, stored and totalled."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from conversations.exceptions import InvalidArgumentError
from conversations.models import Conversation, Evaluation, ModelCall, Run, Score
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services.evaluation import (
    Scoring,
    evaluate,
    format_table,
    parse_grade,
    read_dataset,
    scorer,
    scorers,
)

from .evaluation_support import answering, dataset, second_profile

pytestmark = pytest.mark.django_db

SCORERS = ("exact_match", "contains", "json_schema", "tool_called")


@pytest.fixture
def sloppy(profile):
    return second_profile(profile)


def providers(profile, sloppy, **sloppy_options):
    by_slug = {profile.slug: answering(), sloppy.slug: answering(sloppy=True, **sloppy_options)}
    return lambda p: by_slug[p.slug]


def test_twenty_examples_on_two_profiles_store_runs_scores_and_one_evaluation(
    user, profile, sloppy
):
    report = evaluate(
        examples=dataset(),
        profiles=[profile, sloppy],
        scorer_names=SCORERS,
        owner=user,
        dataset="capitals.jsonl",
        provider_for=providers(profile, sloppy, failing="Spain"),
    )
    evaluation = Evaluation.objects.get()
    assert evaluation == report.evaluation
    assert evaluation.finished_at is not None
    assert evaluation.profiles == ["demo", "sloppy"]
    replays = Conversation.objects.filter(evaluation=evaluation, kind="evaluation")
    assert replays.count() == 40
    assert Run.objects.filter(conversation__in=replays).count() == 40
    totals = evaluation.totals["profiles"]
    assert totals["demo"]["scores"] == {
        "exact_match": 1.0,
        "contains": 1.0,
        "json_schema": 1.0,
        "tool_called": 1.0,
    }
    assert totals["demo"]["failures"] == 0 and totals["demo"]["runs"] == 20
    # Spain's four examples failed on the sloppy profile; the others went on.
    assert totals["sloppy"]["failures"] == 4
    failed = [r for r in report.results if r.failed]
    assert {(r.profile, r.index) for r in failed} == {("sloppy", i) for i in (3, 8, 13, 18)}
    assert all(r.error.startswith("provider_error") for r in failed)
    assert totals["sloppy"]["scores"]["exact_match"] == 0.0
    assert totals["sloppy"]["scores"]["contains"] == 0.0
    # Every scored example has exactly one score per scorer that applies to it (one each here).
    assert Score.objects.filter(evaluation=evaluation, source="evaluator").count() == 40 - 4
    assert totals["demo"]["wins"] == 20
    assert totals["demo"]["latency_p50_ms"] is not None
    assert totals["demo"]["latency_p95_ms"] >= totals["demo"]["latency_p50_ms"]
    table = format_table(report)
    lines = table.splitlines()
    assert lines[0].split() == [
        "profile",
        "runs",
        "failures",
        *SCORERS,
        "cost",
        "p50",
        "ms",
        "p95",
        "ms",
        "wins",
    ]
    assert lines[2].split()[:7] == ["demo", "20", "0", "1.000", "1.000", "1.000", "1.000"]
    assert lines[3].split()[:3] == ["sloppy", "20", "4"]


def test_each_example_row_has_both_answers_and_a_winner(user, profile, sloppy):
    report = evaluate(
        examples=dataset()[:4],
        profiles=[profile, sloppy],
        scorer_names=SCORERS,
        owner=user,
        provider_for=providers(profile, sloppy),
    )
    rows = report.evaluation.totals["examples"]
    assert [row["winner"] for row in rows] == ["demo"] * 4
    assert rows[0]["answers"]["demo"]["answer"] == "Paris"
    assert rows[0]["answers"]["sloppy"]["answer"] == "I do not know"
    assert rows[0]["answers"]["demo"]["scores"] == {"exact_match": True}


def test_an_example_without_input_fails_alone(user, profile, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({"input": "Capital of France?", "expected": "Paris"})
        + "\nnot json\n"
        + json.dumps({"expected": "no input"})
        + "\n"
    )
    examples, digest = read_dataset(path)
    assert len(examples) == 3 and len(digest) == 64
    report = evaluate(
        examples=examples,
        profiles=[profile],
        scorer_names=["exact_match"],
        owner=user,
        dataset_sha256=digest,
        provider_for=lambda p: answering(),
    )
    assert [r.failed for r in report.results] == [False, True, True]
    assert report.results[1].error.startswith("invalid_example: line 2")
    assert report.evaluation.totals["profiles"]["demo"]["failures"] == 2
    assert report.evaluation.dataset_sha256 == digest


def test_a_scorer_that_raises_marks_its_score_only(user, profile):
    @scorer(name="broken_scorer")
    def broken(scoring):
        raise RuntimeError("secret detail")

    try:
        report = evaluate(
            examples=dataset()[:1],
            profiles=[profile],
            scorer_names=["broken_scorer", "exact_match"],
            owner=user,
            provider_for=lambda p: answering(),
        )
    finally:
        scorers.unregister("broken_scorer")
    (result,) = report.results
    assert not result.failed
    assert result.scores == {"exact_match": True}
    assert result.error == "broken_scorer: RuntimeError"


def test_an_unknown_scorer_is_refused_before_anything_is_stored(user, profile):
    with pytest.raises(InvalidArgumentError, match="no scorer named 'nope'"):
        evaluate(examples=dataset(), profiles=[profile], scorer_names=["nope"], owner=user)
    assert not Evaluation.objects.exists()


def test_evaluation_conversations_are_not_in_the_users_list(api, user, profile):
    evaluate(
        examples=dataset()[:2],
        profiles=[profile],
        scorer_names=["exact_match"],
        owner=user,
        provider_for=lambda p: answering(),
    )
    assert Conversation.objects.filter(kind="evaluation").count() == 2
    listed = api.get(reverse("conversations:conversation-list")).json()
    assert listed["results"] == []


@pytest.fixture
def api(user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    return client


def fake(run, answer="", example=None, calls=()):
    return Scoring(example=example or {}, answer=answer, run=run, tool_calls=tuple(calls))


@pytest.fixture
def a_run(conversation):
    return Run.objects.create(conversation=conversation, max_iterations=1, status="completed")


def test_the_built_in_scorers(a_run):
    from conversations.domain import ToolCall

    get = scorers.get
    assert get("exact_match")(fake(a_run, " Paris\n", {"expected": "Paris"})) is True
    assert get("exact_match")(fake(a_run, "paris", {"expected": "Paris"})) is False
    assert get("exact_match")(fake(a_run, "Paris")) is None
    assert get("contains")(fake(a_run, "It is PARIS, France", {"contains": ["paris", "france"]}))
    assert get("contains")(fake(a_run, "It is Paris", {"contains": "Rome"})) is False
    schema = {"type": "object", "required": ["a"]}
    assert get("json_schema")(fake(a_run, '{"a": 1}', {"schema": schema})) is True
    assert get("json_schema")(fake(a_run, '{"b": 1}', {"schema": schema})) is False
    assert get("json_schema")(fake(a_run, "not json", {"schema": schema})) is False
    call = ToolCall(id="c1", name="search", arguments={"q": "x", "filters": {"lang": "de", "n": 3}})
    wanted = {"tool": {"name": "search", "arguments": {"filters": {"lang": "de"}}}}
    assert get("tool_called")(fake(a_run, example=wanted, calls=[call])) is True
    wrong = {"tool": {"name": "search", "arguments": {"filters": {"lang": "fr"}}}}
    assert get("tool_called")(fake(a_run, example=wrong, calls=[call])) is False
    assert get("tool_called")(fake(a_run, example={"tool": "search"}, calls=[])) is False


def test_an_apps_llm_scorers_module_registers_its_scorers():
    assert "short_answer" in scorers.names()
    assert {"exact_match", "contains", "json_schema", "tool_called", "llm_judge"} <= set(
        scorers.names()
    )


@pytest.mark.parametrize(
    ("text", "grade"), [("8", 0.8), ("Grade: 10/10", 1.0), ("0", 0.0), ("no idea", None)]
)
def test_the_judges_grade_is_read_from_its_answer(text, grade):
    assert parse_grade(text) == grade


def test_the_llm_judge_asks_a_named_profile_and_its_calls_are_in_the_ledger(user, profile):
    judge = second_profile(profile, slug="judge")
    judge_provider = ScriptedProvider([scripted_text("7"), scripted_text("9")])
    by_slug = {profile.slug: answering(), judge.slug: judge_provider}
    examples = [
        {"input": "Capital of France? One word.", "rubric": "Names the capital."},
        {"input": "Capital of Germany? One word."},
    ]
    report = evaluate(
        examples=examples,
        profiles=[profile],
        scorer_names=["llm_judge"],
        owner=user,
        judge=judge,
        provider_for=lambda p: by_slug[p.slug],
    )
    assert [r.scores for r in report.results] == [{"llm_judge": 0.7}, {"llm_judge": 0.9}]
    asked = judge_provider.requests[0].messages[-1].content
    assert "Names the capital." in asked and "Paris" in asked
    judged = Conversation.objects.filter(profile=judge, kind="evaluation")
    assert judged.count() == 2
    assert ModelCall.objects.filter(conversation__in=judged).count() == 2


def test_the_readme_evaluation_runs_offline_on_the_demo_provider(django_user_model, profile):
    django_user_model.objects.create_superuser("root")
    path = Path(__file__).resolve().parents[2] / "docs" / "evaluation-example.jsonl"
    out = io.StringIO()
    call_command(
        "evaluate",
        str(path),
        "--profile",
        "demo",
        "--scorer",
        "contains",
        "--scorer",
        "tool_called",
        "--scorer",
        "short_answer",
        stdout=out,
    )
    lines = out.getvalue().splitlines()
    assert "3 example(s) x 1 profile(s)" in lines[0]
    assert lines[1].split()[:6] == [
        "profile",
        "runs",
        "failures",
        "contains",
        "tool_called",
        "short_answer",
    ]
    assert lines[3].split()[:6] == ["demo", "3", "0", "1.000", "1.000", "1.000"]
    assert Evaluation.objects.get().dataset == "evaluation-example.jsonl"


def test_the_command_refuses_unknown_scorers_and_profiles(django_user_model, profile, tmp_path):
    django_user_model.objects.create_superuser("root")
    path = tmp_path / "demo.jsonl"
    path.write_text(json.dumps(dataset()[0]))
    with pytest.raises(CommandError, match="no scorer named 'nope'"):
        call_command("evaluate", str(path), "--profile", "demo", "--scorer", "nope")
    with pytest.raises(CommandError, match="no profile 'ghost'"):
        call_command("evaluate", str(path), "--profile", "demo", "--against", "ghost")
    with pytest.raises(CommandError, match="needs --judge"):
        call_command("evaluate", str(path), "--profile", "demo", "--scorer", "llm_judge")
    assert not Evaluation.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_four_replays_at_once_give_the_same_totals(user, profile, sloppy):
    report = evaluate(
        examples=dataset(),
        profiles=[profile, sloppy],
        scorer_names=SCORERS,
        owner=user,
        concurrency=4,
        provider_for=providers(profile, sloppy, failing="Spain"),
    )
    totals = report.evaluation.totals["profiles"]
    assert totals["demo"]["scores"]["exact_match"] == 1.0
    assert totals["sloppy"]["failures"] == 4
    assert Run.objects.filter(conversation__evaluation=report.evaluation).count() == 40
