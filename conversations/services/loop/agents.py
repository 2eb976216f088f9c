"""Sub-agents: a profile's agents offered as tools, each call a child run of its own conversation.

A profile's ``agents`` are offered to its model as the tools ``agent_<slug>``
taking ``{"task": ..., "context": ...}``. Calling one creates a conversation
of the same owner linked to the call (``Conversation.parent_tool_call``), and
runs the agent's profile in it with the task as the user message, as a run
linked to the caller's (``Run.parent_run``, ``Run.root_run``). It runs in the
tool runner's worker like any tool, so two agent calls of one turn run side
by side, each within the agent's ``agent_timeout``. The child's final answer
(its output as JSON when it has an output schema) is the call's result; a
child that did not complete answers the call with an error text naming why.
A child that waits for an approval leaves the call open (``CallPending``):
the caller's run waits too, and when the child has ended the caller resumes
and the call, run again, answers from the child's run.

The loop hands in the function that runs the child (``RunChild``): this
module cannot import the loop, which builds its tools from here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from django.db import connections

from conversations.conf import app_settings
from conversations.exceptions import ConversationsError, RunNotRunning
from conversations.models import (
    BUSY_RUN_STATUSES,
    TITLE_MAX_LENGTH,
    Conversation,
    Profile,
    Run,
)
from conversations.models import ToolCall as ToolCallRow
from conversations.tools import Tool, ToolContext, ToolError

from ..configuration.agents import agent_tool_name
from .runs import cancel_run
from .tool_calls import CallPending

__all__ = [
    "AGENT_PARAMETERS",
    "RunChild",
    "agent_answer",
    "agent_tools",
    "callers_of",
    "child_message",
]

logger = logging.getLogger("conversations.agents")

AGENT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "What the agent is asked to do."},
        "context": {
            "type": "string",
            "description": "What the agent needs to know for it, if anything.",
        },
    },
    "required": ["task"],
    "additionalProperties": False,
}
"""The arguments of every agent tool."""

_STOPPED: dict[str, str] = {
    Run.Status.BUDGET_EXHAUSTED: "the agent was stopped by a budget",
    Run.Status.CANCELLED: "the agent was cancelled",
    Run.Status.INTERRUPTED: "the agent was interrupted",
}


class RunChild(Protocol):
    """Runs an agent to its end: the loop's ``run_tool_loop`` with a parent run (``None``:
    called over MCP)."""

    def __call__(
        self, *, conversation: Conversation, content: str, profile: Profile, parent_run: Run | None
    ) -> Run: ...


def agent_tools(profile: Profile | None, *, run_child: RunChild | None) -> dict[str, Tool]:
    """The tools that hand a task to each active agent of ``profile``, by name (one query).

    ``run_child`` runs a child; ``None`` builds the tools for their specs only
    (a dry run): calling one then answers with an error.
    """
    if profile is None or profile.pk is None:
        return {}
    tools = {}
    for agent in profile.agents.filter(is_active=True).select_related("language_model"):
        name = agent_tool_name(agent.slug)
        tools[name] = Tool(
            name=name,
            description=agent.description or f"Hand a task to the agent {agent.name}.",
            parameters=AGENT_PARAMETERS,
            func=_hand_over(agent, run_child),
            timeout=agent.agent_timeout,
        )
    return tools


def callers_of(run: Run) -> tuple[Any, ...]:
    """The ids of the runs above ``run``, nearest first (no query for a run of its own)."""
    found: list[Any] = []
    above = run.parent_run_id
    while above is not None and len(found) <= app_settings().MAX_AGENT_DEPTH:
        found.append(above)
        above = Run.objects.filter(pk=above).values_list("parent_run_id", flat=True).first()
    return tuple(found)


def child_message(task: str, context: str = "") -> str:
    """The user message a child run starts with."""
    return f"{task}\n\nContext:\n{context}" if context.strip() else task


def agent_answer(run: Run) -> str:
    """The result of the call a child ``run`` answers; raises :class:`ToolError` if it did not
    complete, :class:`CallPending` while it waits for an approval."""
    if run.status == Run.Status.AWAITING_APPROVAL:
        raise CallPending(f"agent run {run.pk} waits for an approval")
    if run.status in (Run.Status.COMPLETED, Run.Status.MAX_ITERATIONS):
        if run.output_schema_id is not None and run.status == Run.Status.COMPLETED:
            return json.dumps(run.output, ensure_ascii=False)
        return run.final_content
    reason = _STOPPED.get(run.status)
    if reason is None:
        # A failure's code is stable and says what went wrong; its detail stays with admins.
        reason = f"the agent failed ({run.error_code or 'error'})"
    raise ToolError(reason)


def _earlier_child(row: ToolCallRow) -> Run | None:
    """The last run of the conversation an earlier execution of call ``row`` started, if any."""
    return (
        Run.objects.filter(conversation__parent_tool_call=row)
        .order_by("-started_at", "-pk")
        .first()
    )


def _cancel_busy_runs(conversation_id: Any) -> None:
    """Cancel the busy run of a child's conversation (the agent's timeout passed)."""
    try:
        for run in Run.objects.filter(
            conversation_id=conversation_id, status__in=BUSY_RUN_STATUSES
        ):
            with contextlib.suppress(RunNotRunning):  # it may have ended meanwhile
                cancel_run(run=run)
            logger.info("agent run %s cancelled: its agent timeout passed", run.pk)
    finally:
        connections.close_all()


def _hand_over(agent: Profile, run_child: RunChild | None) -> Callable[..., str]:
    def hand_over(task: str, call: ToolContext, context: str = "") -> str:
        if run_child is None:
            raise ToolError("an agent can only be called by a run or over MCP")
        if call.run_id is None:
            return _for_user(agent, run_child, task, context, call.user_id)
        row = ToolCallRow.objects.select_related("conversation").get(
            conversation_id=str(call.conversation_id), call_id=call.call_id
        )
        parent = Run.objects.get(pk=str(call.run_id))
        if parent.cancel_requested:
            raise ToolError(_STOPPED[Run.Status.CANCELLED])
        earlier = _earlier_child(row)
        if earlier is not None:
            # The call runs again as its run resumes: its child waited and has ended since.
            return agent_answer(earlier)
        child = Conversation.objects.create(
            owner_id=row.conversation.owner_id,
            profile=agent,
            parent_tool_call=row,
            title=task.strip()[:TITLE_MAX_LENGTH],
        )
        return agent_answer(_run(agent, run_child, child, child_message(task, context), parent))

    hand_over.__name__ = agent_tool_name(agent.slug)
    hand_over.__qualname__ = f"agent:{agent.slug}"
    return hand_over


def _for_user(agent: Profile, run_child: RunChild, task: str, context: str, user_id: Any) -> str:
    """A call over MCP (no run): the task becomes a conversation of the caller's own."""
    if user_id is None:
        raise ToolError("an agent can only be called by a run or over MCP")
    conversation = Conversation.objects.create(
        owner_id=user_id, profile=agent, title=task.strip()[:TITLE_MAX_LENGTH]
    )
    run = _run(agent, run_child, conversation, child_message(task, context), None)
    try:
        return agent_answer(run)
    except CallPending:
        raise ToolError(
            "the agent waits for an approval: decide it, then read its conversation"
        ) from None


def _run(
    agent: Profile,
    run_child: RunChild,
    conversation: Conversation,
    content: str,
    parent: Run | None,
) -> Run:
    """Run ``agent`` in ``conversation``, cancelled when its ``agent_timeout`` passes."""
    # Past the agent's timeout the caller answers the call timed out and stops
    # waiting: the child is cancelled then, so it does not run on unseen.
    watchdog = threading.Timer(agent.agent_timeout, _cancel_busy_runs, args=(conversation.pk,))
    watchdog.daemon = True
    watchdog.start()
    try:
        return run_child(
            conversation=conversation, content=content, profile=agent, parent_run=parent
        )
    except ConversationsError as exc:
        logger.info("agent %s could not start in %s: %s", agent.slug, conversation.pk, exc)
        raise ToolError(f"the agent could not start ({exc.code})") from None
    finally:
        watchdog.cancel()
