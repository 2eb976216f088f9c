"""Evaluations: replay a dataset's examples on profiles, score each answer, total the results.

Each example is replayed on each profile in a conversation of its own
(``kind="evaluation"``, in the ``Evaluation``, hidden from the user's list),
through the tool loop like any turn, so its runs, calls and costs are in the
record. Scores are ``Score`` rows (``source="evaluator"``) on the run. An
example that fails (no input, a provider error, an exception in the loop) is
recorded as failed and the others go on. With ``concurrency`` above 1 the
replays run in that many threads, each with its own database connection.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.db import connections
from django.utils import timezone

from conversations import domain
from conversations.exceptions import ConversationsError, InvalidArgumentError
from conversations.models import Conversation, Evaluation, Profile, Run, ScoreSource, ToolCall
from conversations.providers import ChatProvider
from conversations.selectors import tool_call_to_domain

from ..feedback import add_score
from ..loop.tool_loop import run_tool_loop
from ..transcript.messages import append_messages
from .scorers import Scoring, scorers

__all__ = [
    "EvaluationReport",
    "ExampleResult",
    "evaluate",
    "format_table",
    "read_dataset",
]

ProviderFor = Callable[[Profile], ChatProvider]
"""Which provider answers for a profile (tests hand scripted ones; default: the profile's)."""


@dataclass(frozen=True, slots=True)
class ExampleResult:
    """One example replayed on one profile."""

    index: int
    """The example's line number in the dataset, from 0."""
    profile: str
    """The profile's slug."""
    run_id: str | None = None
    """The run that answered (``None`` when none started)."""
    answer: str = ""
    """The final answer."""
    failed: bool = False
    """The example failed: no run, or a run that did not complete."""
    error: str = ""
    """Why it failed (a code and a short text), or which scorers raised."""
    scores: Mapping[str, float | bool | str] = field(default_factory=dict)
    """Each scorer's value (those with nothing to judge are absent)."""
    latency_ms: int | None = None
    """Wall time of the replay."""
    cost: Decimal | None = None
    """The run's cost, when priced."""


@dataclass(frozen=True, slots=True)
class EvaluationReport:
    """What :func:`evaluate` did: the stored evaluation and every result."""

    evaluation: Evaluation
    results: tuple[ExampleResult, ...]


def read_dataset(path: str | Path) -> tuple[list[dict[str, Any]], str]:
    """The examples of a JSON Lines file and the sha256 of its bytes.

    A line that is not a JSON object becomes an example marked ``_invalid``:
    it fails on its own when replayed instead of stopping the others.
    """
    data = Path(path).read_bytes()
    examples: list[dict[str, Any]] = []
    for number, raw in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            value = {"_invalid": f"line {number} is not a JSON object"}
        examples.append(value)
    return examples, hashlib.sha256(data).hexdigest()


def _input(example: Mapping[str, Any]) -> tuple[str, list[domain.ChatMessage]]:
    if "_invalid" in example:
        raise InvalidArgumentError(str(example["_invalid"]), code="invalid_example")
    given = example.get("input", example.get("messages"))
    if isinstance(given, str) and given.strip():
        return given, []
    if isinstance(given, list) and given and isinstance(given[-1], Mapping):
        last = given[-1]
        if last.get("role") == "user" and isinstance(last.get("content"), str):
            return last["content"], [domain.ChatMessage.from_dict(m) for m in given[:-1]]
    raise InvalidArgumentError(
        "an example needs input: a string, or messages ending with a user message",
        code="invalid_example",
        field="input",
    )


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ConversationsError):
        return f"{exc.code}: {str(exc)[:200]}"
    # Not the app's: its text may hold anything; the type names it for the admin.
    return type(exc).__name__


@dataclass(frozen=True, slots=True)
class _Plan:
    evaluation: Evaluation
    owner: Any
    scorer_names: tuple[str, ...]
    judge: Profile | None
    provider_for: ProviderFor | None


def _replay(plan: _Plan, index: int, example: Mapping[str, Any], profile: Profile) -> ExampleResult:
    start = time.monotonic()
    base = ExampleResult(index=index, profile=profile.slug)
    try:
        content, prior = _input(example)
        conversation = Conversation.objects.create(
            owner=plan.owner,
            profile=profile,
            kind=Conversation.Kind.EVALUATION,
            evaluation=plan.evaluation,
            title=f"Evaluation {plan.evaluation.pk}, example {index}",
            metadata={"example": index},
        )
        if prior:
            append_messages(conversation=conversation, messages=prior)
        provider = plan.provider_for(profile) if plan.provider_for is not None else None
        run = run_tool_loop(
            conversation=conversation, content=content, profile=profile, provider=provider
        )
    except Exception as exc:
        return _failed(base, _error_text(exc), start)
    latency = round((time.monotonic() - start) * 1000)
    if run.status != Run.Status.COMPLETED:
        error = f"{run.error_code or run.status}: {run.error_message[:200]}".rstrip(": ")
        return ExampleResult(
            index=index,
            profile=profile.slug,
            run_id=str(run.pk),
            failed=True,
            error=error,
            latency_ms=latency,
            cost=run.cost,
        )
    calls = tuple(
        tool_call_to_domain(call)
        for call in ToolCall.objects.filter(message__run=run).order_by("message__position", "index")
    )
    scoring = Scoring(
        example=example,
        answer=run.final_content,
        run=run,
        tool_calls=calls,
        judge=plan.judge,
        evaluation=plan.evaluation,
        options={"provider_for": plan.provider_for},
    )
    values: dict[str, float | bool | str] = {}
    broken: list[str] = []
    for name in plan.scorer_names:
        try:
            value = scorers.get(name)(scoring)
        except Exception as exc:
            broken.append(f"{name}: {_error_text(exc)}")
            continue
        if value is None:
            continue
        add_score(
            target=run,
            name=name,
            value=value,
            source=ScoreSource.EVALUATOR,
            evaluation=plan.evaluation,
        )
        values[name] = value
    return ExampleResult(
        index=index,
        profile=profile.slug,
        answer=run.final_content,
        run_id=str(run.pk),
        error="; ".join(broken),
        scores=values,
        latency_ms=latency,
        cost=run.cost,
    )


def _failed(base: ExampleResult, error: str, start: float) -> ExampleResult:
    latency = round((time.monotonic() - start) * 1000)
    return ExampleResult(
        index=base.index, profile=base.profile, failed=True, error=error, latency_ms=latency
    )


def _in_thread(
    plan: _Plan, index: int, example: Mapping[str, Any], profile: Profile
) -> ExampleResult:
    try:
        return _replay(plan, index, example, profile)
    finally:
        # A pool thread's connections are its own; leaving them open would leak one per thread.
        connections.close_all()


def _percentile(values: Sequence[int], share: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _numeric(value: float | bool | str) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    return None


def _mean_of(result: ExampleResult) -> float:
    if result.failed:
        return -math.inf
    numbers = [n for n in map(_numeric, result.scores.values()) if n is not None]
    return statistics.fmean(numbers) if numbers else 0.0


def _winners(results: Sequence[ExampleResult], profiles: Sequence[str]) -> dict[int, str]:
    by_example: dict[int, list[ExampleResult]] = {}
    for result in results:
        by_example.setdefault(result.index, []).append(result)
    winners: dict[int, str] = {}
    if len(profiles) < 2:
        return winners
    for index, group in by_example.items():
        means = {result.profile: _mean_of(result) for result in group}
        best = max(means.values())
        leaders = [slug for slug, mean in means.items() if mean == best]
        winners[index] = leaders[0] if len(leaders) == 1 and best > -math.inf else "tie"
    return winners


def _totals(
    results: Sequence[ExampleResult], profiles: Sequence[str], scorer_names: Sequence[str]
) -> dict[str, Any]:
    winners = _winners(results, profiles)
    per_profile: dict[str, Any] = {}
    for slug in profiles:
        mine = [r for r in results if r.profile == slug]
        latencies = [r.latency_ms for r in mine if r.latency_ms is not None and not r.failed]
        costs = [r.cost for r in mine if r.cost is not None]
        means: dict[str, float | None] = {}
        for name in scorer_names:
            numbers = [
                n
                for r in mine
                if name in r.scores
                for n in [_numeric(r.scores[name])]
                if n is not None
            ]
            means[name] = round(statistics.fmean(numbers), 4) if numbers else None
        per_profile[slug] = {
            "runs": sum(1 for r in mine if r.run_id is not None),
            "failures": sum(1 for r in mine if r.failed),
            "scores": means,
            "cost": str(sum(costs, Decimal(0))) if costs else None,
            "latency_p50_ms": _percentile(latencies, 0.5),
            "latency_p95_ms": _percentile(latencies, 0.95),
            "wins": sum(1 for winner in winners.values() if winner == slug),
        }
    examples: dict[int, dict[str, Any]] = {}
    for result in sorted(results, key=lambda r: (r.index, profiles.index(r.profile))):
        row = examples.setdefault(
            result.index,
            {"index": result.index, "winner": winners.get(result.index), "answers": {}},
        )
        row["answers"][result.profile] = {
            "run": result.run_id,
            "answer": result.answer[:2000],
            "failed": result.failed,
            "error": result.error,
            "scores": dict(result.scores),
        }
    return {"profiles": per_profile, "examples": list(examples.values())}


def evaluate(
    *,
    examples: Sequence[Mapping[str, Any]],
    profiles: Sequence[Profile],
    scorer_names: Sequence[str],
    owner: Any,
    dataset: str = "",
    dataset_sha256: str | None = None,
    judge: Profile | None = None,
    concurrency: int = 1,
    provider_for: ProviderFor | None = None,
) -> EvaluationReport:
    """Replay every example on every profile, score the answers, store and return the totals.

    ``owner`` owns the replay conversations. Raises :class:`InvalidArgumentError`
    for an unknown scorer, no profile, or a concurrency below 1, before
    anything is stored.
    """
    names = tuple(dict.fromkeys(scorer_names))
    for name in names:
        scorers.get(name)
    if not profiles:
        raise InvalidArgumentError("name at least one profile", code="no_profile", field="profile")
    if concurrency < 1:
        raise InvalidArgumentError(
            "concurrency must be at least 1", code="invalid_concurrency", field="concurrency"
        )
    digest = (
        dataset_sha256
        or hashlib.sha256(
            json.dumps(list(examples), sort_keys=True, default=str).encode()
        ).hexdigest()
    )
    evaluation = Evaluation.objects.create(
        profiles=[profile.slug for profile in profiles],
        scorers=list(names),
        dataset=dataset[:255],
        dataset_sha256=digest,
        examples=len(examples),
        created_by=owner,
    )
    plan = _Plan(evaluation, owner, names, judge, provider_for)
    tasks = [
        (index, example, profile) for index, example in enumerate(examples) for profile in profiles
    ]
    results: list[ExampleResult]
    if concurrency == 1:
        results = [_replay(plan, *task) for task in tasks]
    else:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="evaluate") as pool:
            results = list(pool.map(lambda task: _in_thread(plan, *task), tasks))
    slugs = [profile.slug for profile in profiles]
    evaluation.totals = _totals(results, slugs, names)
    for row in evaluation.totals["examples"]:
        given = examples[row["index"]].get("input", examples[row["index"]].get("messages"))
        row["input"] = (given if isinstance(given, str) else json.dumps(given, default=str))[:500]
    evaluation.finished_at = timezone.now()
    evaluation.save(update_fields=["totals", "finished_at"])
    return EvaluationReport(evaluation=evaluation, results=tuple(results))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _rows(report: EvaluationReport) -> Iterator[list[str]]:
    evaluation = report.evaluation
    yield [
        "profile",
        "runs",
        "failures",
        *evaluation.scorers,
        "cost",
        "p50 ms",
        "p95 ms",
        *(["wins"] if len(evaluation.profiles) > 1 else []),
    ]
    for slug, totals in evaluation.totals["profiles"].items():
        yield [
            slug,
            _cell(totals["runs"]),
            _cell(totals["failures"]),
            *(_cell(totals["scores"].get(name)) for name in evaluation.scorers),
            _cell(totals["cost"]),
            _cell(totals["latency_p50_ms"]),
            _cell(totals["latency_p95_ms"]),
            *([_cell(totals["wins"])] if len(evaluation.profiles) > 1 else []),
        ]


def format_table(report: EvaluationReport) -> str:
    """The evaluation's totals as a plain-text table: one row per profile."""
    rows = list(_rows(report))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join([lines[0], "  ".join("-" * width for width in widths), *lines[1:]])
