"""Feedback and score rows broken through raw SQL: the database refuses each (both vendors)."""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest
from django.db import IntegrityError, transaction

from conversations.models import Conversation, Evaluation, Feedback, Run, Score

from . import sql

pytestmark = pytest.mark.django_db


@contextmanager
def refused(*patterns):
    with (
        pytest.raises(IntegrityError, match="|".join(re.escape(p) for p in patterns)),
        transaction.atomic(),
    ):
        yield


@pytest.fixture
def run(conversation):
    return Run.objects.create(conversation=conversation, max_iterations=5, status="completed")


@pytest.fixture
def targets(answered_turn, run):
    assistant, call, _answer, _final = answered_turn
    return {"message_id": assistant.pk, "tool_call_id": call.pk, "run_id": sql.db_id(Run, run.pk)}


def insert_feedback(user, **values):
    return sql.insert(Feedback, user_id=user.pk, value=values.pop("value", 1), **values)


def test_feedback_on_each_single_target_is_accepted(user, targets):
    for column, value in targets.items():
        insert_feedback(user, **{column: value})
    assert Feedback.objects.count() == 3


@pytest.mark.parametrize(
    "columns",
    [("message_id", "tool_call_id"), ("message_id", "run_id"), ("tool_call_id", "run_id")],
)
def test_the_database_refuses_feedback_with_two_targets(user, targets, columns):
    with refused("conversations_feedback_one_target"):
        insert_feedback(user, **{column: targets[column] for column in columns})


def test_the_database_refuses_feedback_with_all_three_targets_or_none(user, targets):
    with refused("conversations_feedback_one_target"):
        insert_feedback(user, **targets)
    with refused("conversations_feedback_one_target"):
        insert_feedback(user)


@pytest.mark.parametrize("value", [0, 2, -2])
def test_the_database_refuses_a_value_other_than_up_or_down(user, targets, value):
    with refused("conversations_feedback_value_sign"):
        insert_feedback(user, message_id=targets["message_id"], value=value)


def test_the_database_refuses_tags_that_are_not_a_list(user, targets):
    with refused("conversations_feedback_tags_array"):
        insert_feedback(user, message_id=targets["message_id"], tags={"wrong": True})


@pytest.mark.parametrize("column", ["message_id", "tool_call_id", "run_id"])
def test_the_database_keeps_one_feedback_row_per_user_and_target(user, other_user, targets, column):
    insert_feedback(user, **{column: targets[column]})
    insert_feedback(other_user, **{column: targets[column]})  # another user's is their own
    with refused(
        f"conversations_feedback_one_per_{column.removesuffix('_id')}",
        f"conversations_feedback.{column}",
    ):
        insert_feedback(user, value=-1, **{column: targets[column]})


def insert_score(**values):
    values.setdefault("name", "quality")
    values.setdefault("source", "evaluator")
    return sql.insert(Score, **values)


def test_a_score_with_one_target_and_one_value_is_accepted(targets):
    insert_score(run_id=targets["run_id"], value_number=0.5)
    insert_score(message_id=targets["message_id"], value_bool=True)
    insert_score(run_id=targets["run_id"], value_label="good")
    assert Score.objects.count() == 3


@pytest.mark.parametrize(
    "values",
    [
        {"value_number": 1.0, "value_bool": True},
        {"value_number": 1.0, "value_label": "good"},
        {"value_bool": False, "value_label": "bad"},
        {},
    ],
)
def test_the_database_refuses_a_score_without_exactly_one_value(targets, values):
    with refused("conversations_score_one_value"):
        insert_score(run_id=targets["run_id"], **values)


def test_the_database_refuses_a_score_with_two_targets_or_none(targets):
    with refused("conversations_score_one_target"):
        insert_score(run_id=targets["run_id"], message_id=targets["message_id"], value_bool=True)
    with refused("conversations_score_one_target"):
        insert_score(value_bool=True)


def test_the_database_refuses_a_score_with_an_unknown_source_or_no_name(targets):
    with refused("conversations_score_source_valid"):
        insert_score(run_id=targets["run_id"], value_bool=True, source="robot")
    with refused("conversations_score_name_not_empty"):
        insert_score(run_id=targets["run_id"], value_bool=True, name="")


def test_only_an_evaluation_conversation_belongs_to_an_evaluation(conversation):
    evaluation = Evaluation.objects.create(dataset_sha256="a" * 64, profiles=["demo"])
    with refused("conversations_conversation_evaluation_kind"):
        sql.update(Conversation, conversation.pk, evaluation_id=evaluation.pk)
    with refused("conversations_conversation_kind_valid"):
        sql.update(Conversation, conversation.pk, kind="secret")
    sql.update(Conversation, conversation.pk, evaluation_id=evaluation.pk, kind="evaluation")
    assert Conversation.objects.get(pk=conversation.pk).evaluation == evaluation


def test_the_database_refuses_an_evaluation_without_a_hex_digest():
    with refused("conversations_evaluation_sha256_hex"):
        sql.insert(Evaluation, dataset_sha256="not a digest", profiles=[], totals={})
