"""Branches: forks copy a valid prefix, edits and regenerations answer in a new branch."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from conversations.domain import Usage
from conversations.exceptions import BudgetExceeded, InvalidArgumentError, WouldSplitToolCall
from conversations.models import Budget, Conversation, Message, Run, ToolCall
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import run_tool_loop, submit_message
from conversations.services.history.branches import (
    edit_message,
    fork_conversation,
    regenerate_answer,
)
from tests.models.sql import db_id, delete, insert, update

pytestmark = pytest.mark.django_db


def _turn(conversation, content="Weather in Paris, and 6*7?"):
    """user, assistant with two calls, two results, answer (positions 0..4)."""
    provider = ScriptedProvider(
        [
            scripted_calls(
                ("get_weather", {"city": "Paris"}),
                ("calculate", {"expression": "6*7"}),
                usage=Usage(prompt_tokens=20, completion_tokens=5),
            ),
            scripted_text("Paris: light rain; 6*7 = 42.", usage=Usage(prompt_tokens=40)),
        ]
    )
    return run_tool_loop(conversation=conversation, content=content, provider=provider)


_TEXT = scripted_text("ok", usage=Usage(prompt_tokens=2, completion_tokens=1))


@pytest.fixture
def history(demo_conversation):
    _turn(demo_conversation)
    return demo_conversation


def test_a_root_is_its_own_branch_root(conversation):
    assert conversation.branch_root_id == conversation.pk
    assert conversation.forked_from_id is None


def test_fork_copies_the_prefix_with_calls_statuses_and_results(history):
    branch = fork_conversation(conversation=history, position=3)

    assert branch.owner_id == history.owner_id
    assert branch.profile_id == history.profile_id
    assert branch.forked_from_id == history.pk
    assert branch.forked_at_position == 3
    assert branch.branch_root_id == history.pk
    copied = list(branch.messages.order_by("position"))
    original = list(history.messages.order_by("position"))[:4]
    assert [(m.position, m.role, m.content, m.is_error) for m in copied] == [
        (m.position, m.role, m.content, m.is_error) for m in original
    ]
    assert get_history(conversation=branch) == get_history(conversation=history)[:4]
    calls = {c.call_id: c for c in ToolCall.objects.filter(conversation=branch)}
    for call in ToolCall.objects.filter(conversation=history):
        assert calls[call.call_id].arguments == call.arguments
        assert calls[call.call_id].status == call.status == ToolCall.Status.SUCCEEDED
        assert calls[call.call_id].finished_at == call.finished_at
    # Runs (and the usage they paid for) stay with the source.
    assert not Run.objects.filter(conversation=branch).exists()
    assert not branch.messages.filter(run__isnull=False).exists()
    assert not branch.messages.filter(prompt_tokens__isnull=False).exists()
    assert history.messages.count() == 5


@pytest.mark.parametrize("position", [1, 2])
def test_a_cut_between_a_call_and_its_result_is_refused(history, position):
    with pytest.raises(WouldSplitToolCall) as caught:
        fork_conversation(conversation=history, position=position)
    assert caught.value.code == "would_split_tool_call"
    assert Conversation.objects.count() == 1


@pytest.mark.parametrize("position", [0, 3, 4])
def test_cuts_that_keep_every_pair_are_allowed(history, position):
    branch = fork_conversation(conversation=history, position=position)
    assert branch.messages.count() == position + 1


@pytest.mark.parametrize("position", [5, -1, "2", True])
def test_a_position_the_conversation_does_not_have_is_refused(history, position):
    with pytest.raises(InvalidArgumentError) as caught:
        fork_conversation(conversation=history, position=position)
    assert (caught.value.code, caught.value.field) == ("invalid_position", "position")


def test_a_branch_of_a_branch_keeps_the_family_root(history):
    first = fork_conversation(conversation=history, position=4)
    second = fork_conversation(conversation=first, position=3)
    assert second.forked_from_id == first.pk
    assert second.branch_root_id == history.pk
    assert second.messages.count() == 4


def test_the_database_rules_hold_in_a_branch(history):
    branch = fork_conversation(conversation=history, position=3)
    source_call = ToolCall.objects.filter(conversation=history).first()
    branch_call = ToolCall.objects.get(conversation=branch, call_id=source_call.call_id)
    branch_id = db_id(Conversation, branch.pk)
    # A result in the branch cannot answer the source's call (rule 4) ...
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(
            Message,
            conversation_id=branch_id,
            position=4,
            role="tool",
            tool_call_id=source_call.pk,
        )
    # ... nor answer a call of the branch a second time.
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(
            Message, conversation_id=branch_id, position=4, role="tool", tool_call_id=branch_call.pk
        )
    # Positions stay unique and copied rows stay where they are.
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(Message, conversation_id=branch_id, position=3, role="user", content="again")
    first = branch.messages.get(position=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        update(Message, first.pk, position=9)


def test_a_new_call_in_a_branch_must_be_answered_before_a_user_message(history):
    branch = fork_conversation(conversation=history, position=4)
    branch_id = db_id(Conversation, branch.pk)
    assistant = insert(Message, conversation_id=branch_id, position=5, role="assistant")
    insert(
        ToolCall,
        message_id=assistant,
        conversation_id=branch_id,
        index=0,
        call_id="call_new",
        name="get_weather",
        arguments={},
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(Message, conversation_id=branch_id, position=6, role="user", content="hi")


def test_edit_forks_before_the_user_message_and_answers_in_the_branch(history):
    turn = edit_message(conversation=history, position=0, content="And in Rome?")
    branch = turn.branch
    assert branch.forked_from_id == history.pk
    assert branch.forked_at_position is None
    assert turn.run.conversation_id == branch.pk
    assert turn.run.status == Run.Status.COMPLETED
    messages = list(branch.messages.order_by("position"))
    assert messages[0].role == "user" and messages[0].content == "And in Rome?"
    assert messages[-1].role == "assistant"
    assert history.messages.get(position=0).content == "Weather in Paris, and 6*7?"


def test_edit_of_a_later_user_message_keeps_what_came_before(history):
    _turn(history, content="And tomorrow?")  # positions 5..9
    turn = edit_message(conversation=history, position=5, content="And next week?")
    messages = list(turn.branch.messages.order_by("position"))
    assert turn.branch.forked_at_position == 4
    assert [m.content for m in messages[:5]] == [
        m.content for m in history.messages.order_by("position")[:5]
    ]
    assert messages[5].content == "And next week?"


@pytest.mark.parametrize("position", [1, 4, 42])
def test_only_a_user_message_can_be_edited(history, position):
    with pytest.raises(InvalidArgumentError) as caught:
        edit_message(conversation=history, position=position, content="x")
    assert caught.value.code == "invalid_position"
    assert Conversation.objects.count() == 1


def test_regenerate_forks_after_the_last_user_message_and_answers_again(history):
    turn = regenerate_answer(conversation=history)
    assert turn.branch.forked_at_position == 0
    messages = list(turn.branch.messages.order_by("position"))
    assert messages[0].content == "Weather in Paris, and 6*7?"
    assert messages[1].role == "assistant"
    assert turn.run.status == Run.Status.COMPLETED
    assert turn.run.conversation_id == turn.branch.pk


def test_regenerate_needs_a_user_message(demo_conversation):
    with pytest.raises(InvalidArgumentError) as caught:
        regenerate_answer(conversation=demo_conversation)
    assert caught.value.code == "nothing_to_regenerate"


@pytest.mark.parametrize(
    "answer",
    [
        lambda conversation: edit_message(conversation=conversation, position=0, content="x"),
        lambda conversation: regenerate_answer(conversation=conversation),
        lambda conversation: submit_message(conversation=conversation, content="x"),
    ],
    ids=["edit", "regenerate", "post"],
)
def test_a_used_up_budget_is_refused_before_anything_is_stored(history, user, answer):
    Budget.objects.create(name="spent", scope="user", user=user, period="total", token_limit=1)
    run_tool_loop(conversation=history, content="more", provider=ScriptedProvider([_TEXT]))
    stored = (Conversation.objects.count(), Message.objects.count(), Run.objects.count())
    with pytest.raises(BudgetExceeded) as caught:
        answer(history)
    assert caught.value.budget == "spent"
    assert (Conversation.objects.count(), Message.objects.count(), Run.objects.count()) == stored


@pytest.mark.postgres
def test_a_result_a_later_message_needs_cannot_be_deleted_in_a_branch(history):
    branch = fork_conversation(conversation=history, position=4)
    answer = branch.messages.get(position=2)
    refused = pytest.raises(IntegrityError, match="conversations_message_answer_kept")
    with refused, transaction.atomic():
        delete(Message, answer.pk)
        connection.check_constraints()
    assert branch.messages.count() == 5
