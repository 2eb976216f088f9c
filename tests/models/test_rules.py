"""The ten conversation rules, broken through raw SQL: the database must refuse each.

Each failing statement runs in its own ``atomic()`` (a savepoint), so the test's
transaction stays usable. The error must name the rule's constraint or trigger
(SQLite names the columns of a UNIQUE index instead of the index).
"""

from __future__ import annotations

import re
import uuid
from contextlib import contextmanager

import pytest
from django.db import IntegrityError, connection, transaction

from conversations.models import Message, Run, ToolCall

from . import sql
from .factories import add_call, add_message

pytestmark = pytest.mark.django_db

postgres_only = pytest.mark.postgres


@contextmanager
def refused(*names):
    """Expect ``IntegrityError`` whose message mentions one of ``names``."""
    pattern = "|".join(re.escape(name) for name in names)
    with pytest.raises(IntegrityError, match=pattern), transaction.atomic():
        yield


def insert_message(conversation, position, role, **values):
    return sql.insert(
        Message, conversation_id=conversation.pk, position=position, role=role, **values
    )


def insert_call(message, conversation_id=None, **values):
    values.setdefault("index", 0)
    values.setdefault("call_id", f"call_{uuid.uuid4().hex[:8]}")
    values.setdefault("name", "get_weather")
    return sql.insert(
        ToolCall,
        message_id=message.pk,
        conversation_id=conversation_id or message.conversation_id,
        **values,
    )


# Rule 1: role is system, user, assistant or tool -------------------------------------


@pytest.mark.parametrize("role", ["bogus", "", "Tool", "function"])
def test_rule1_unknown_role_is_refused(conversation, role):
    with refused("conversations_message_role_valid"):
        insert_message(conversation, 0, role)


@pytest.mark.parametrize("role", ["system", "user", "assistant"])
def test_rule1_known_roles_are_accepted(conversation, role):
    insert_message(conversation, 0, role, content="hi")
    assert Message.objects.get(conversation=conversation).role == role


# Rule 2: a tool message answers exactly one call; any other message none ----------------


def test_rule2_tool_message_without_call_is_refused(conversation):
    with refused("conversations_message_tool_call_iff_tool"):
        insert_message(conversation, 0, "tool", content="orphan result")


@pytest.mark.parametrize("role", ["user", "assistant", "system"])
def test_rule2_other_message_with_call_is_refused(conversation, answered_turn, role):
    _, call, _, _ = answered_turn
    with refused("conversations_message_tool_call_iff_tool"):
        insert_message(conversation, 4, role, tool_call_id=call.pk)


# Rule 3: a tool call belongs to an assistant message ------------------------------------


@pytest.mark.parametrize("role", ["user", "system"])
def test_rule3_call_on_non_assistant_message_is_refused(conversation, role):
    message = add_message(conversation, 0, role)
    with refused("conversations_toolcall_assistant_message"):
        insert_call(message)


def test_rule3_call_on_tool_message_is_refused(conversation, open_turn):
    _, call = open_turn
    answer = add_message(conversation, 2, "tool", tool_call=call)
    with refused("conversations_toolcall_assistant_message"):
        insert_call(answer)


def test_rule3_holds_for_the_orm_too(conversation):
    message = add_message(conversation, 0, "user")
    with refused("conversations_toolcall_assistant_message"):
        add_call(message)


# Rule 4: answered at most once, in the same conversation, after the call ---------------------


def test_rule4_second_answer_is_refused(conversation, open_turn):
    _, call = open_turn
    insert_message(conversation, 2, "tool", tool_call_id=call.pk, content="first")
    with refused(
        "conversations_message_tool_call_answered_once", "conversations_message.tool_call_id"
    ):
        insert_message(conversation, 3, "tool", tool_call_id=call.pk, content="second")


def test_rule4_answer_from_another_conversation_is_refused(open_turn, other_conversation):
    _, call = open_turn
    with refused("conversations_message_answer_pairing"):
        insert_message(other_conversation, 0, "tool", tool_call_id=call.pk)


def test_rule4_answer_before_the_call_is_refused(conversation):
    add_message(conversation, 0, "user")
    assistant = add_message(conversation, 5, "assistant")
    call = add_call(assistant)
    with refused("conversations_message_answer_pairing"):
        insert_message(conversation, 3, "tool", tool_call_id=call.pk)


def test_rule4_answer_to_a_missing_call_is_refused(conversation):
    add_message(conversation, 0, "user")
    with refused("conversations_message_answer_pairing"):
        insert_message(conversation, 1, "tool", tool_call_id=987654)


def test_rule4_answered_call_cannot_be_deleted(conversation, answered_turn):
    _, call, _, _ = answered_turn
    # Message.tool_call is RESTRICT; the deferred foreign key refuses at commit.
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.delete(ToolCall, call.pk)
        connection.check_constraints()


# Rule 5: arguments is a JSON object --------------------------------------------------------


@pytest.mark.parametrize("arguments", [[], [1, 2], "x", "{}", 1, 1.5, True, None])
def test_rule5_arguments_that_are_not_an_object_are_refused(conversation, arguments):
    assistant = add_message(conversation, 0, "assistant")
    with refused("conversations_toolcall_arguments_object"):
        insert_call(assistant, arguments=arguments)


@pytest.mark.parametrize("arguments", [{}, {"city": "Zürich", "days": [1, 2]}])
def test_rule5_objects_are_accepted(conversation, arguments):
    assistant = add_message(conversation, 0, "assistant")
    pk = insert_call(assistant, arguments=arguments)
    assert ToolCall.objects.get(pk=pk).arguments == arguments


def test_rule5_update_to_an_array_is_refused(conversation, open_turn):
    _, call = open_turn
    with refused("conversations_toolcall_arguments_object"):
        sql.update(ToolCall, call.pk, arguments=[])


@pytest.mark.parametrize(
    ("field", "constraint"),
    [
        ("metadata", "conversations_conversation_metadata_object"),
    ],
)
def test_json_object_columns_refuse_arrays(conversation, field, constraint):
    from conversations.models import Conversation

    with refused(constraint):
        sql.update(Conversation, conversation.pk, **{field: []})


def test_message_provider_metadata_must_be_an_object(conversation):
    with refused("conversations_message_provider_metadata_object"):
        insert_message(conversation, 0, "assistant", provider_metadata=["x"])


# Rule 6: call_id and name non-empty; call_id unique per conversation; (message, index) unique


@pytest.mark.parametrize("column", ["call_id", "name"])
def test_rule6_empty_call_id_or_name_is_refused(conversation, column):
    assistant = add_message(conversation, 0, "assistant")
    with refused("conversations_toolcall_call_id_name_not_empty"):
        insert_call(assistant, **{column: ""})


def test_rule6_call_id_reused_in_the_conversation_is_refused(conversation, answered_turn):
    add_message(conversation, 4, "user")
    later = add_message(conversation, 5, "assistant")
    with refused(
        "conversations_toolcall_call_id_unique",
        "conversations_toolcall.conversation_id, conversations_toolcall.call_id",
    ):
        insert_call(later, call_id="call_1")


def test_rule6_same_call_id_in_another_conversation_is_accepted(open_turn, other_conversation):
    assistant = add_message(other_conversation, 0, "assistant")
    insert_call(assistant, call_id="call_1")
    assert ToolCall.objects.filter(call_id="call_1").count() == 2


def test_rule6_duplicate_index_in_a_message_is_refused(conversation, open_turn):
    assistant, _ = open_turn
    with refused(
        "conversations_toolcall_index_unique",
        "conversations_toolcall.message_id, conversations_toolcall.index",
    ):
        insert_call(assistant, index=0, call_id="call_2")


def test_rule6_call_in_another_conversation_than_its_message_is_refused(
    conversation, other_conversation
):
    assistant = add_message(conversation, 0, "assistant")
    with refused("conversations_toolcall_conversation_match"):
        insert_call(assistant, conversation_id=other_conversation.pk)


# Rule 7: position >= 0 and unique in the conversation ---------------------------------------


def test_rule7_negative_position_is_refused(conversation):
    with refused("position"):
        insert_message(conversation, -1, "user")


def test_rule7_duplicate_position_is_refused(conversation):
    insert_message(conversation, 0, "user")
    with refused(
        "conversations_message_position_unique",
        "conversations_message.conversation_id, conversations_message.position",
    ):
        insert_message(conversation, 0, "user")


def test_rule7_same_position_in_two_conversations_is_accepted(conversation, other_conversation):
    insert_message(conversation, 0, "user")
    insert_message(other_conversation, 0, "user")


# Rule 8: no orphans ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["user", "system", "assistant"])
def test_rule8_message_after_open_calls_is_refused(conversation, open_turn, role):
    with refused("conversations_message_no_orphans"):
        insert_message(conversation, 2, role, content="next")


def test_rule8_message_after_partly_answered_calls_is_refused(conversation, open_turn):
    assistant, first = open_turn
    second = add_call(assistant, index=1, call_id="call_2")
    insert_message(conversation, 2, "tool", tool_call_id=second.pk)
    with refused("conversations_message_no_orphans"):
        insert_message(conversation, 3, "user")
    insert_message(conversation, 3, "tool", tool_call_id=first.pk)
    insert_message(conversation, 4, "user")


def test_rule8_tool_messages_are_accepted_while_calls_are_open(conversation, open_turn):
    _, call = open_turn
    insert_message(conversation, 2, "tool", tool_call_id=call.pk)
    insert_message(conversation, 3, "assistant", content="done")


def test_rule8_message_in_another_conversation_is_accepted(open_turn, other_conversation):
    insert_message(other_conversation, 0, "user")


def test_rule8_message_before_the_answer_is_refused(conversation, open_turn):
    # Answered, but at position 5: a user message at 3 would sit between call and answer.
    _, call = open_turn
    insert_message(conversation, 5, "tool", tool_call_id=call.pk)
    with refused("conversations_message_no_orphans"):
        insert_message(conversation, 3, "user")


def test_rule8_call_added_to_an_answered_over_turn_is_refused(conversation):
    add_message(conversation, 0, "user")
    assistant = add_message(conversation, 1, "assistant", content="Hello")
    add_message(conversation, 2, "user", content="And?")
    with refused("conversations_toolcall_no_orphans"):
        insert_call(assistant)


def test_rule8_call_added_to_the_last_turn_is_accepted(conversation, open_turn):
    assistant, _ = open_turn
    insert_call(assistant, index=1, call_id="call_2")


@postgres_only
def test_rule8_deleting_an_answer_before_later_messages_is_refused(conversation, answered_turn):
    _, _, answer, _ = answered_turn
    # A deferred constraint trigger: it fires when constraints are checked (at commit).
    with refused("conversations_message_answer_kept"):
        sql.delete(Message, answer.pk)
        connection.check_constraints()


@postgres_only
def test_rule8_deleting_a_history_tail_is_accepted(conversation, answered_turn):
    _, _, answer, final = answered_turn
    with transaction.atomic():
        sql.delete(Message, final.pk)
        sql.delete(Message, answer.pk)
        connection.check_constraints()
    assert list(conversation.messages.values_list("position", flat=True)) == [0, 1]


@postgres_only
def test_rule8_replacing_an_answer_in_one_transaction_is_accepted(conversation, answered_turn):
    _, call, answer, _ = answered_turn
    with transaction.atomic():
        sql.delete(Message, answer.pk)
        insert_message(conversation, 4, "tool", tool_call_id=call.pk, content="corrected")
        connection.check_constraints()


def test_rule8_deleting_the_whole_conversation_is_accepted(conversation, answered_turn):
    conversation.delete()
    connection.check_constraints()
    assert not Message.objects.exists()
    assert not ToolCall.objects.exists()


def test_rule8_deleting_the_owner_is_accepted(user, conversation, answered_turn):
    user.delete()
    connection.check_constraints()
    assert not Message.objects.exists()


# The columns the cross-row rules read never change -------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("position", 9), ("role", "user"), ("tool_call_id", None)],
)
def test_structure_of_an_answer_cannot_change(conversation, answered_turn, field, value):
    _, _, answer, _ = answered_turn
    with refused("conversations_message_immutable"):
        sql.update(Message, answer.pk, **{field: value})


def test_message_cannot_move_to_another_conversation(answered_turn, other_conversation):
    _, _, _, final = answered_turn
    with refused("conversations_message_immutable"):
        sql.update(Message, final.pk, conversation_id=other_conversation.pk)


def test_message_content_and_run_can_change(conversation, answered_turn):
    _, _, answer, _ = answered_turn
    run = Run.objects.create(conversation=conversation, max_iterations=3)
    sql.update(Message, answer.pk, content="19C", run_id=run.pk)
    answer.content = "20C"
    answer.save()  # the ORM's UPDATE rewrites unchanged columns too: accepted
    answer.refresh_from_db()
    assert answer.content == "20C"


def test_call_cannot_move_to_another_message(conversation, answered_turn):
    _, call, _, final = answered_turn
    with refused("conversations_toolcall_immutable"):
        sql.update(ToolCall, call.pk, message_id=final.pk)


def test_call_state_can_change(conversation, open_turn):
    _, call = open_turn
    sql.update(ToolCall, call.pk, status="running", error="")
    call.refresh_from_db()
    assert call.status == ToolCall.Status.RUNNING


# Rule 9: at most one running run per conversation -----------------------------------------------


def test_rule9_second_running_run_is_refused(conversation):
    sql.insert(Run, id=uuid.uuid4(), conversation_id=conversation.pk, max_iterations=5)
    with refused("conversations_run_one_running", "conversations_run.conversation_id"):
        sql.insert(Run, id=uuid.uuid4(), conversation_id=conversation.pk, max_iterations=5)


def test_rule9_finished_runs_do_not_count(conversation, other_conversation):
    for status in ["completed", "failed", "interrupted"]:
        sql.insert(
            Run, id=uuid.uuid4(), conversation_id=conversation.pk, max_iterations=5, status=status
        )
    sql.insert(Run, id=uuid.uuid4(), conversation_id=conversation.pk, max_iterations=5)
    sql.insert(Run, id=uuid.uuid4(), conversation_id=other_conversation.pk, max_iterations=5)


def test_run_status_must_be_known(conversation):
    with refused("conversations_run_status_valid"):
        sql.insert(
            Run, id=uuid.uuid4(), conversation_id=conversation.pk, max_iterations=5, status="done"
        )


def test_call_status_must_be_known(conversation):
    assistant = add_message(conversation, 0, "assistant")
    with refused("conversations_toolcall_status_valid"):
        insert_call(assistant, status="done")


# Rule 10: counts and latencies >= 0; iterations <= max_iterations --------------------------------


@pytest.mark.parametrize(
    "column",
    [
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cached_prompt_tokens",
        "reasoning_tokens",
        "latency_ms",
    ],
)
def test_rule10_negative_message_counts_are_refused(conversation, column):
    with refused("conversations_message_counts_non_negative", column):
        insert_message(conversation, 0, "assistant", **{column: -1})


@pytest.mark.parametrize(
    "column",
    [
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cached_prompt_tokens",
        "reasoning_tokens",
    ],
)
def test_rule10_negative_run_counts_are_refused(conversation, column):
    with refused("conversations_run_counts_non_negative", column):
        sql.insert(
            Run, id=uuid.uuid4(), conversation_id=conversation.pk, max_iterations=5, **{column: -1}
        )


def test_rule10_iterations_beyond_max_are_refused(conversation):
    run_id = uuid.uuid4()
    sql.insert(Run, id=run_id, conversation_id=conversation.pk, max_iterations=2, iterations=2)
    with refused("conversations_run_iterations_within_max"):
        sql.update(Run, run_id, iterations=3)
    with refused("conversations_run_max_iterations_positive"):
        sql.update(Run, run_id, iterations=0, max_iterations=0)
