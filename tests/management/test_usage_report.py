"""``manage.py usage_report``: the same totals as ``GET /usage/``, as a table."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from conversations.domain import Usage
from conversations.models import ModelCall
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import run_tool_loop

pytestmark = pytest.mark.django_db


def report(*args):
    out = io.StringIO()
    call_command("usage_report", *args, stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture
def calls(demo_conversation, language_model):
    language_model.input_price_per_million = Decimal("1")
    language_model.output_price_per_million = Decimal("1")
    language_model.save()
    for content in ("one", "two"):
        provider = ScriptedProvider([scripted_text("ok", usage=Usage(1000, 500))])
        run_tool_loop(conversation=demo_conversation, content=content, provider=provider)
    first, second = ModelCall.objects.order_by("started_at", "pk")
    ModelCall.objects.filter(pk=first.pk).update(started_at=datetime(2026, 11, 3, tzinfo=UTC))
    ModelCall.objects.filter(pk=second.pk).update(started_at=datetime(2026, 10, 3, tzinfo=UTC))


def test_report_by_model_since_a_day(calls):
    lines = report("--since", "2026-11-01", "--until", "2026-11-30", "--group-by", "model")
    assert lines[0] == "Usage 2026-11-01 .. 2026-11-30 by model (cost in USD)"
    assert lines[1].split() == [
        "model",
        *["calls", "failed", "unpriced", "prompt", "cached", "completion", "reasoning", "cost"],
    ]
    assert lines[2].split() == ["demo-model", "1", "0", "0", "1000", "0", "500", "0", "0.001500"]
    assert lines[3].split() == ["total", "1", "0", "0", "1000", "0", "500", "0", "0.001500"]


def test_report_by_day_and_user(calls):
    by_day = report("--since", "2026-10-01", "--until", "2026-11-30")
    assert [line.split()[0] for line in by_day[2:]] == ["2026-10-03", "2026-11-03", "total"]
    by_user = report("--since", "2026-10-01", "--until", "2026-11-30", "--group-by", "user")
    assert by_user[2].split()[:2] == ["alice", "2"]
    assert (
        report("--since", "2026-10-01", "--until", "2026-11-30", "--user", "alice")[-1].split()[1]
        == "2"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--since", "November"), "not a date"),
        (("--since", "2026-11-02", "--until", "2026-11-01"), "must not be after"),
        (("--since", "2026-11-01", "--user", "nobody"), "no user named"),
    ],
)
def test_report_refuses_bad_arguments(args, message):
    with pytest.raises(CommandError, match=message):
        report(*args)
