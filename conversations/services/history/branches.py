"""Branches: fork a conversation at a position, edit a user message, regenerate an answer.

A branch is a conversation of its own, owned by the same user, whose first
messages are copies of its source's (same positions, roles, contents, call
ids, arguments; tool-call statuses and results come along; runs, usage and
latency stay with the conversation that paid for them). The copy goes
through ``append_messages`` and so through the same database rules as any
other write: every branch is a valid conversation.

Editing and regenerating fork first (committed), then run the loop in the
branch like a posted message does; no transaction is held across the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Prefetch

from conversations import domain
from conversations.exceptions import InvalidArgumentError, WouldSplitToolCall
from conversations.models import (
    Citation,
    Conversation,
    Message,
    MessageAttachment,
    ProviderToolCall,
    Run,
    ToolCall,
)
from conversations.selectors import message_to_domain

from ..configuration.providers import build_provider
from ..loop.executors import submit_message
from ..loop.run_limits import check_run_capacity
from ..loop.runs import resolve_profile
from ..transcript.messages import MessageDetails, append_messages
from ..usage.budgets import check_budgets

__all__ = [
    "Turn",
    "branch_for_edit",
    "branch_for_regenerate",
    "edit_message",
    "fork_conversation",
    "regenerate_answer",
]

_CALL_STATE_FIELDS = ("status", "started_at", "finished_at", "error")
_MAX_POSITION = 2**31 - 1  # the column's range on PostgreSQL


@dataclass(frozen=True, slots=True)
class Turn:
    """A branch and the run that answers in it."""

    branch: Conversation
    """The new conversation."""
    run: Run
    """Its run (finished with the ``inline`` executor, ``running`` with ``celery``)."""


def fork_conversation(*, conversation: Conversation, position: int | None) -> Conversation:
    """Copy messages ``0..position`` of ``conversation`` into a new branch and return it.

    ``position=None`` makes an empty branch (nothing copied; an edit of the
    first message). Raises :class:`InvalidArgumentError` (``invalid_position``,
    field ``position``) for a position the conversation does not have, and
    :class:`WouldSplitToolCall` when a copied call's answer lies after the cut
    (or it has none yet).
    """
    if position is not None and (
        isinstance(position, bool)
        or not isinstance(position, int)
        or not 0 <= position <= _MAX_POSITION
    ):
        raise InvalidArgumentError(
            f"position must be a non-negative integer, got {position!r}",
            code="invalid_position",
            field="position",
        )
    messages: list[Message] = []
    calls: list[ToolCall] = []
    if position is not None:
        messages = list(
            Message.objects.filter(conversation=conversation, position__lte=position)
            .select_related("tool_call")
            # The copies reference the same attachments (never copies of their bytes).
            .prefetch_related(
                Prefetch(
                    "attachment_links",
                    queryset=MessageAttachment.objects.select_related("attachment").order_by(
                        "position"
                    ),
                )
            )
            .order_by("position")
        )
        if not messages or messages[-1].position != position:
            raise InvalidArgumentError(
                f"the conversation has no message at position {position}",
                code="invalid_position",
                field="position",
            )
        calls = list(
            ToolCall.objects.filter(
                conversation=conversation, message__position__lte=position
            ).order_by("message_id", "index")
        )
        _check_cut(calls, messages, position)
    by_message: dict[int, list[ToolCall]] = {}
    for call in calls:
        by_message.setdefault(call.message_id, []).append(call)
    items = [message_to_domain(m, calls=by_message.get(m.pk, ())) for m in messages]
    # Model and finish reason describe the message; usage and latency were paid by a run.
    details: list[MessageDetails | None] = [
        MessageDetails(model=m.model, finish_reason=m.finish_reason) for m in messages
    ]
    with transaction.atomic():
        branch = Conversation.objects.create(
            owner_id=conversation.owner_id,
            title=conversation.title,
            profile_id=conversation.profile_id,
            metadata=dict(conversation.metadata),
            forked_from=conversation,
            forked_at_position=position,
            branch_root_id=conversation.branch_root_id or conversation.pk,
        )
        rows = append_messages(conversation=branch, messages=items, details=details)
        _copy_call_states(calls, rows)
        _copy_provider_activity(messages, rows)
    return branch


def _copy_provider_activity(messages: list[Message], rows: list[Message]) -> None:
    """The provider's tool calls and citations of the copied assistant turns, on their copies."""
    copies = {m.pk: row for m, row in zip(messages, rows, strict=True) if m.role == "assistant"}
    if not copies:
        return
    ran = list(ProviderToolCall.objects.filter(message_id__in=list(copies)))
    cited = list(Citation.objects.filter(message_id__in=list(copies)))
    for ran_row in ran:
        ran_row.pk, ran_row.message = None, copies[ran_row.message_id]
    for cited_row in cited:
        cited_row.pk, cited_row.message = None, copies[cited_row.message_id]
    if ran:
        ProviderToolCall.objects.bulk_create(ran)
    if cited:
        Citation.objects.bulk_create(cited)


def _check_cut(calls: list[ToolCall], messages: list[Message], position: int) -> None:
    answered = {m.tool_call_id for m in messages if m.tool_call_id is not None}
    split = [call.call_id for call in calls if call.pk not in answered]
    if split:
        raise WouldSplitToolCall(
            f"a cut at position {position} would leave tool call(s) {', '.join(split)} "
            "without their result; cut before the assistant message or after its results"
        )


def _copy_call_states(calls: list[ToolCall], rows: list[Message]) -> None:
    if not calls:
        return
    source = {call.call_id: call for call in calls}
    copies: list[ToolCall] = []
    for row in rows:
        for copy in row.tool_calls.all():  # handed over by append_messages, no query
            original = source[copy.call_id]
            for field in _CALL_STATE_FIELDS:
                setattr(copy, field, getattr(original, field))
            copies.append(copy)
    ToolCall.objects.bulk_update(copies, _CALL_STATE_FIELDS)


def branch_for_edit(*, conversation: Conversation, position: int) -> Conversation:
    """The branch an edit of the user message at ``position`` is answered in.

    Raises :class:`InvalidArgumentError` (``invalid_position``) when there is
    no user message at ``position``, :class:`ConfigurationError` when no
    model could answer in the branch and :class:`BudgetExceeded` when a
    blocking budget is used up (both checked before anything is copied).
    """
    target = None
    if isinstance(position, int) and 0 <= position <= _MAX_POSITION:
        target = Message.objects.filter(conversation=conversation, position=position).first()
    if target is None or target.role != domain.Role.USER.value:
        raise InvalidArgumentError(
            f"there is no user message at position {position}",
            code="invalid_position",
            field="position",
        )
    _check_answerable(conversation)
    return fork_conversation(
        conversation=conversation, position=position - 1 if position > 0 else None
    )


def branch_for_regenerate(*, conversation: Conversation) -> Conversation:
    """The branch the last user message is answered again in (cut just after it).

    Raises :class:`InvalidArgumentError` (``nothing_to_regenerate``) when the
    conversation has no user message, :class:`ConfigurationError` and
    :class:`BudgetExceeded` as :func:`branch_for_edit` does.
    """
    last_user = (
        Message.objects.filter(conversation=conversation, role=domain.Role.USER.value)
        .order_by("-position")
        .values_list("position", flat=True)
        .first()
    )
    if last_user is None:
        raise InvalidArgumentError(
            "the conversation has no user message to answer again", code="nothing_to_regenerate"
        )
    _check_answerable(conversation)
    return fork_conversation(conversation=conversation, position=last_user)


def _check_answerable(conversation: Conversation) -> None:
    # A branch nobody can answer, or that a used-up budget or the user's
    # limit of running runs would refuse to answer, would be left behind by
    # the failing request.
    check_run_capacity(user_id=conversation.owner_id)
    profile = resolve_profile(conversation=conversation, profile=None, provider=None)
    assert profile is not None  # resolve_profile raises without one
    build_provider(profile)
    check_budgets(user_id=conversation.owner_id, profile_id=profile.pk)


def edit_message(*, conversation: Conversation, position: int, content: str) -> Turn:
    """Fork just before the user message at ``position`` and post ``content`` in the branch."""
    branch = branch_for_edit(conversation=conversation, position=position)
    return Turn(branch=branch, run=submit_message(conversation=branch, content=content))


def regenerate_answer(*, conversation: Conversation) -> Turn:
    """Fork just after the last user message and run the loop again in the branch."""
    branch = branch_for_regenerate(conversation=conversation)
    return Turn(branch=branch, run=submit_message(conversation=branch, content=None))
