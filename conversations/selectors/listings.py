"""The querysets the API and the admin list and show, each in a constant number of queries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import (
    Case,
    Count,
    DecimalField,
    Exists,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from conversations.conf import app_settings
from conversations.models import (
    Citation,
    Conversation,
    Message,
    MessageAttachment,
    ProviderToolCall,
    Run,
    ToolCall,
)

__all__ = [
    "Transcript",
    "admin_conversations",
    "admin_messages",
    "admin_runs",
    "admin_tool_calls",
    "conversation_family",
    "conversation_messages",
    "conversation_transcript",
    "conversations_with_summary",
    "count_of",
    "descendant_runs",
    "has_live_run",
    "has_running_run",
    "last_run_status",
    "owned_conversations",
    "owned_runs",
    "run_messages",
    "run_trace",
    "run_with_calls",
    "runs_with_calls",
    "with_agent_conversation",
    "with_tool_calls",
]

Transcript = tuple[list[Message], list[ToolCall], dict[int, Message]]
"""Messages in position order, the calls shown beside them, and each call's answer by call pk."""


def count_of(queryset: QuerySet[Any], group_by: str) -> Coalesce:
    """``COUNT(*)`` of ``queryset`` as a correlated subquery (0 when nothing matches).

    ``queryset`` is already filtered on ``OuterRef``; ``group_by`` is the
    column it is correlated on, so the subquery yields a single row. A
    subquery, not a JOIN + ``Count``, so that search and filter joins on the
    outer query cannot multiply the count.
    """
    counted = queryset.order_by().values(group_by).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def last_run_status() -> Subquery:
    """The status of a conversation's most recent run (``None`` without runs)."""
    latest = Run.objects.filter(conversation=OuterRef("pk")).order_by("-started_at", "-pk")
    return Subquery(latest.values("status")[:1])


def has_live_run() -> Exists:
    """Whether a run with an unexpired heartbeat is running on a conversation.

    A running run whose heartbeat is older than the lease belongs to a process
    that died: recovery ends it, so it does not keep its conversation busy.
    """
    cutoff = timezone.now() - timedelta(seconds=app_settings().RUN_LEASE_SECONDS)
    return Exists(
        Run.objects.filter(
            conversation=OuterRef("pk"), status=Run.Status.RUNNING, heartbeat_at__gte=cutoff
        )
    )


def has_running_run() -> Exists:
    """Whether a conversation has a run in progress (for ``filter``/``annotate``)."""
    return Exists(Run.objects.filter(conversation=OuterRef("pk"), status=Run.Status.RUNNING))


# The API --------------------------------------------------------------------------------------


def conversations_with_summary(*, conversations: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """``conversations`` with profile, message count and last run, in one query."""
    count = (
        Message.objects.filter(conversation=OuterRef("pk"))
        .order_by()
        .values("conversation")
        .annotate(n=Count("pk"))
        .values("n")
    )
    last_run = Run.objects.filter(conversation=OuterRef("pk")).order_by("-started_at", "-id")
    return conversations.select_related("profile").annotate(
        message_count=Coalesce(Subquery(count, output_field=IntegerField()), Value(0)),
        last_run_id=Subquery(last_run.values("pk")[:1]),
        last_run_status=Subquery(last_run.values("status")[:1]),
    )


_PROVIDER_ACTIVITY = (
    Prefetch("provider_tool_calls", queryset=ProviderToolCall.objects.order_by("index")),
    Prefetch("citations", queryset=Citation.objects.order_by("index")),
)


def with_agent_conversation(*, calls: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """``calls``, each with the conversation of the agent it ran (``agent_conversation_id``)."""
    agent = Conversation.objects.filter(parent_tool_call=OuterRef("pk")).values("pk")[:1]
    return calls.annotate(agent_conversation_id=Subquery(agent))


def _calls() -> QuerySet[ToolCall]:
    """A message's calls in order, each with the conversation of the agent it ran, if any."""
    return with_agent_conversation(calls=ToolCall.objects.order_by("index"))


def with_tool_calls(*, messages: QuerySet[Message]) -> QuerySet[Message]:
    """Messages with the call each answers, the calls each makes, their model call's cost, the
    tools the provider ran and the sources it cited for each, and their attachments (one query
    for the links of all of them, with the attachments)."""
    return messages.select_related("tool_call", "model_call").prefetch_related(
        Prefetch("tool_calls", queryset=_calls()),
        Prefetch(
            "attachment_links",
            queryset=MessageAttachment.objects.select_related("attachment").order_by("position"),
        ),
        *_PROVIDER_ACTIVITY,
    )


def conversation_messages(
    *, conversation: Conversation, after: int | None = None
) -> QuerySet[Message]:
    """The messages of ``conversation`` with their calls; only those after ``after`` if given."""
    messages = with_tool_calls(messages=Message.objects.filter(conversation=conversation))
    if after is not None:
        messages = messages.filter(position__gt=after)
    return messages


def run_messages(*, run: Run) -> list[Message]:
    """The messages ``run`` wrote, in order, with their calls."""
    return list(with_tool_calls(messages=Message.objects.filter(run=run)).order_by("position"))


def descendant_runs(*, run: Any) -> QuerySet[Run]:
    """The runs agent calls of ``run`` (a run or an ``OuterRef``) started, at any depth."""
    below = Q()
    path = "parent_run"
    for _ in range(max(app_settings().MAX_AGENT_DEPTH, 1)):
        below |= Q(**{path: run})
        path += "__parent_run"
    return Run.objects.filter(below)


def runs_with_calls(*, runs: QuerySet[Run]) -> QuerySet[Run]:
    """Runs with their profile, their assistant messages with calls (``assistant_messages``),
    the runs their agent calls started (``child_runs``) and the cost of all the runs below
    them (``descendants_cost``: null when none had a price)."""
    assistant = (
        Message.objects.filter(role=Message.Role.ASSISTANT)
        .only("id", "run_id", "position")
        .order_by("position")
        .prefetch_related(Prefetch("tool_calls", queryset=_calls()))
    )
    below = (
        descendant_runs(run=OuterRef("pk"))
        .order_by()
        .values(one=Value(1))
        .annotate(total=Sum("cost"))
        .values("total")
    )
    children = Run.objects.select_related("profile").order_by("started_at", "id")
    # The output schema's digest only: its JSON can be large and is served on its own.
    return (
        runs.select_related("profile", "output_schema")
        .defer("output_schema__schema")
        .annotate(
            descendants_cost=Subquery(
                below, output_field=DecimalField(max_digits=18, decimal_places=9)
            )
        )
        .prefetch_related(
            Prefetch("messages", queryset=assistant, to_attr="assistant_messages"),
            Prefetch("children", queryset=children, to_attr="child_runs"),
        )
    )


def run_with_calls(*, run_id: Any) -> Run:
    """One run, loaded as :func:`runs_with_calls` loads a list of them."""
    return runs_with_calls(runs=Run.objects.filter(pk=run_id)).get()


def conversation_family(
    *, conversations: QuerySet[Conversation], conversation: Conversation
) -> QuerySet[Conversation]:
    """The members of ``conversations`` in ``conversation``'s family, root first, then by age."""
    root = conversation.branch_root_id or conversation.pk
    is_root = Case(When(pk=root, then=Value(0)), default=Value(1), output_field=IntegerField())
    return conversations.filter(branch_root_id=root).order_by(is_root, "created_at", "pk")


def owned_conversations(*, user: Any) -> QuerySet[Conversation]:
    """The user's conversations: the only ones an API view may touch."""
    return Conversation.objects.filter(owner=user)


def owned_runs(*, user: Any) -> QuerySet[Run]:
    """The runs of the user's conversations."""
    return Run.objects.filter(conversation__owner=user)


# The admin ------------------------------------------------------------------------------------


def admin_conversations(*, conversations: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """Conversations with their message count, last run status and whether one is running."""
    return conversations.annotate(
        message_count=count_of(Message.objects.filter(conversation=OuterRef("pk")), "conversation"),
        last_run_status=last_run_status(),
        has_running_run=has_running_run(),
    )


def admin_runs(*, runs: QuerySet[Run]) -> QuerySet[Run]:
    """Runs with conversation, profile and their number of calls."""
    calls = ToolCall.objects.filter(message__run=OuterRef("pk"))
    return runs.select_related("conversation", "profile").annotate(
        call_count=count_of(calls, "message__run")
    )


def admin_tool_calls(*, calls: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """Calls with conversation and run, searchable by their arguments as text."""
    # CAST(... AS text) on both SQLite and PostgreSQL: a term matches keys and values as stored.
    return calls.select_related("conversation", "message__run").alias(
        arguments_text=Cast("arguments", output_field=TextField())
    )


def admin_messages(*, messages: QuerySet[Message]) -> QuerySet[Message]:
    """Messages with conversation, answered call and run."""
    return messages.select_related("conversation", "tool_call", "run")


def _attachment_links() -> Prefetch[str]:
    """A message's files with it (one query for the links of all the messages, with the files)."""
    return Prefetch(
        "attachment_links",
        queryset=MessageAttachment.objects.select_related("attachment").order_by("position"),
    )


def conversation_transcript(*, conversation: Conversation) -> Transcript:
    """Everything the transcript of a conversation shows, in five queries whatever its length
    (the messages with the provider's tool calls and citations, their files, then the calls).
    Each answer's call record (where the view it was asked with began) comes with the messages."""
    rows = list(
        conversation.messages.select_related("model_call__context_summary")
        .order_by("position")
        .prefetch_related(*_PROVIDER_ACTIVITY, _attachment_links())
    )
    calls = list(ToolCall.objects.filter(conversation=conversation))
    results = {m.tool_call_id: m for m in rows if m.tool_call_id is not None}
    return rows, calls, results


def run_trace(*, run: Run) -> Transcript:
    """Everything the trace of a run shows, in seven queries (messages and answers each with
    their files, and the provider's tool calls and citations of its messages).

    The run's messages, its calls, and the answers to them: an answer can
    belong to no run (one written by recovery, say).
    """
    rows = list(
        run.messages.select_related("tool_call", "model_call__context_summary")
        .order_by("position")
        .prefetch_related(*_PROVIDER_ACTIVITY, _attachment_links())
    )
    calls = list(ToolCall.objects.filter(message__run=run))
    answers = Message.objects.filter(tool_call__in=[c.pk for c in calls])
    results = {
        m.tool_call_id: m
        for m in answers.prefetch_related(_attachment_links())
        if m.tool_call_id is not None
    }
    return rows, calls, results
