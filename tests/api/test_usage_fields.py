"""Every usage object the app stores or shows has the counts of the domain's ``Usage``."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from conversations.api.serializers import UsageSerializer
from conversations.domain import USAGE_FIELDS
from conversations.models import Message, ModelCall, Run
from conversations.selectors.export import conversation_lines

pytestmark = pytest.mark.django_db


def columns(model):
    return {field.name for field in model._meta.get_fields()}


def test_runs_and_messages_have_a_column_per_count_and_the_ledger_all_but_the_total():
    assert set(USAGE_FIELDS) <= columns(Run)
    assert set(USAGE_FIELDS) <= columns(Message)
    assert set(USAGE_FIELDS) - columns(ModelCall) == {"total_tokens"}


# The API's usage objects add one flag to the counts: whether they are an estimate.
API_USAGE = (*USAGE_FIELDS, "estimated")


def test_the_api_usage_object_has_exactly_the_counts_and_the_estimate_flag():
    assert tuple(UsageSerializer().fields) == API_USAGE


def test_a_run_and_its_answer_show_every_count(api, history):
    run = api.get(reverse("conversations:run-detail", args=[history.pk])).json()
    assert tuple(run["usage"]) == API_USAGE
    messages = api.get(
        reverse("conversations:conversation-messages", args=[history.conversation_id])
    ).json()["results"]
    answers = [m for m in messages if m["usage"] is not None]
    assert answers and all(tuple(m["usage"]) == API_USAGE for m in answers)


def test_the_export_carries_every_count_of_a_run(user, history):
    (line,) = [json.loads(text) for text in conversation_lines(user=user)]
    (run,) = line["runs"]
    assert tuple(run["usage"]) == USAGE_FIELDS
    assert run["usage"]["reasoning_tokens"] == history.reasoning_tokens == 3
