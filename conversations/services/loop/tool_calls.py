"""Tool calls: check each call, execute it, answer it, and every text the model is told.

Whatever the model reads about a call that did not succeed is written here
and nowhere else: a rejection (unknown tool, not permitted, invalid or raw
arguments), a failure (a tool's own :class:`~conversations.tools.ToolError`
text, or a fixed sentence for any other exception), and the answers given to
calls that never completed (interrupted, cancelled, timed out). Every such
answer is stored with ``is_error`` set, so adapters can flag it natively.
"""

from __future__ import annotations

import dataclasses
import logging
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from conversations.conf import app_settings
from conversations.domain import ChatMessage, FilePart
from conversations.domain.storable import storable_text
from conversations.models import Conversation, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.selectors import TranscriptTail
from conversations.tools import (
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    registry,
    truncate_result,
    validate_arguments,
)
from conversations.tools.execution import execute_result, execute_result_async

from ..transcript.messages import append_after, append_messages
from .fencing import hold_run
from .hot_path import Held, hold_for_results, update_call_states
from .tool_files import ToolFilesRefused, store_tool_files

__all__ = [
    "ANSWER_TEXTS",
    "ARGUMENTS_CHANGED",
    "INVALID_ARGUMENTS",
    "NOT_PERMITTED",
    "RAW_ARGUMENTS",
    "REJECTED_BY_REVIEWER",
    "TOOL_ERROR",
    "TOOL_FAILED",
    "TOOL_TIMED_OUT",
    "UNKNOWN_TOOL",
    "CallOutcome",
    "CallPending",
    "answer_open_calls",
    "answer_text_for",
    "cancelled_call",
    "check_call",
    "execute_call",
    "execute_call_async",
    "persist_outcomes",
    "reject_call",
    "rejected_by_reviewer_text",
    "storage_failed",
    "timed_out_call",
    "timed_out_text",
    "tool_error_text",
]

logger = logging.getLogger("conversations.tool_loop")

# What the model is told, word for word (tests pin these).
UNKNOWN_TOOL: Final = 'Error: unknown tool "{name}"'
NOT_PERMITTED: Final = 'Error: tool "{name}" not permitted'
INVALID_ARGUMENTS: Final = 'Error: invalid arguments for tool "{name}": {violations}'
RAW_ARGUMENTS: Final = 'Error: arguments for tool "{name}" are not a JSON object'
TOOL_FAILED: Final = 'Error: tool "{name}" failed.'
TOOL_ERROR: Final = 'Error: tool "{name}" failed: {message}'
"""A :class:`ToolError`: its author wrote the message for the model (and the user) to read."""
REJECTED_BY_REVIEWER: Final = 'Error: tool "{name}" was rejected by a reviewer'
"""A call a human rejected; ``: REASON`` follows when the reviewer gave one."""
ARGUMENTS_CHANGED: Final = 'Error: tool "{name}" was not run: its arguments changed after approval'
TOOL_TIMED_OUT: Final = 'Error: tool "{name}" timed out after {seconds} s.'
"""A call that ran past its timeout; ``{seconds}`` is written like ``%g`` (``60``, ``0.5``)."""

ANSWER_TEXTS: Final[Mapping[str, str]] = {
    ToolCallRow.Status.INTERRUPTED: 'Error: tool "{name}" was interrupted and did not complete.',
    ToolCallRow.Status.CANCELLED: 'Error: tool "{name}" was cancelled and did not complete.',
}
"""The answer of a call that never completed, by the status it ends with."""


def tool_error_text(template: str, name: str, **extra: str) -> str:
    """One of the pinned error texts, filled in."""
    return template.format(name=name, **extra)


def rejected_by_reviewer_text(name: str, reason: str = "") -> str:
    """What the model reads about a call a human rejected (with the reason, if any)."""
    text = tool_error_text(REJECTED_BY_REVIEWER, name)
    return f"{text}: {reason}" if reason else text


def answer_text_for(status: str, name: str) -> str:
    """The result a call gets when it never completed (``interrupted`` or ``cancelled``)."""
    return ANSWER_TEXTS[status].format(name=name)


class CallPending(Exception):
    """Raised by a call that cannot be answered yet: an agent whose run waits for an approval.

    The call stays open (``awaiting_approval``) and its run waits with it; the
    call runs again when the run resumes.
    """


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What became of one call: its status and the result the model sees."""

    row: ToolCallRow
    """The stored call."""
    status: str
    """The call's final status (a ``ToolCall.Status``)."""
    content: str
    """The tool message's content: the result, or the error text the model reads."""
    error: str = ""
    """Detail for admins only (a traceback); never sent to the model."""
    started_at: datetime | None = None
    """When the tool started (``None``: it never ran)."""
    finished_at: datetime | None = None
    """When it ended (``None``: the moment the outcome is stored)."""
    parts: tuple[FilePart, ...] = ()
    """The files the tool returned, stored: references the tool message carries."""

    @property
    def pending(self) -> bool:
        """The call has no answer yet (see :class:`CallPending`)."""
        return self.status == ToolCallRow.Status.AWAITING_APPROVAL

    @property
    def is_error(self) -> bool:
        """Whether the answer reports anything but a success."""
        return self.status != ToolCallRow.Status.SUCCEEDED

    def to_message(self) -> ChatMessage:
        """The tool message answering the call."""
        return ChatMessage.tool_result(
            self.row.call_id, self.content, is_error=self.is_error, parts=self.parts
        )


def check_call(*, row: ToolCallRow, tools: Mapping[str, Tool]) -> CallOutcome | None:
    """The rejection for a call that must not run, or ``None`` when it may."""
    name = row.name
    tool = tools.get(name)
    if tool is None:
        template = NOT_PERMITTED if registry.get(name) is not None else UNKNOWN_TOOL
        return CallOutcome(row, ToolCallRow.Status.REJECTED, tool_error_text(template, name))
    if row.raw_arguments is not None:
        return CallOutcome(row, ToolCallRow.Status.REJECTED, tool_error_text(RAW_ARGUMENTS, name))
    violations = validate_arguments(tool, row.arguments)
    if violations:
        text = tool_error_text(INVALID_ARGUMENTS, name, violations="; ".join(violations))
        return CallOutcome(row, ToolCallRow.Status.REJECTED, text)
    return None


def reject_call(*, row: ToolCallRow) -> CallOutcome:
    """The answer of a call made when no tool was offered."""
    return CallOutcome(row, ToolCallRow.Status.REJECTED, tool_error_text(NOT_PERMITTED, row.name))


def cancelled_call(*, row: ToolCallRow) -> CallOutcome:
    """The answer of a call skipped because its run was cancelled."""
    status = ToolCallRow.Status.CANCELLED
    return CallOutcome(row, status, answer_text_for(status, row.name))


def _context(run: Run, row: ToolCallRow) -> ToolContext:
    return ToolContext(conversation_id=run.conversation_id, run_id=run.pk, call_id=row.call_id)


def execute_call(*, run: Run, row: ToolCallRow, tool: Tool) -> CallOutcome:
    """Run one checked call's tool in this thread (no transaction is open); its outcome.

    ``row`` must have passed :func:`check_call` against ``tool``: its
    arguments are not validated again.

    A :class:`ToolError` is an answer its author meant the model to read: its
    message is shown. Any other exception may hold secrets in its text, so the
    model gets a fixed sentence, and admins the traceback (on the call and in
    the log). An ``async def`` tool is run to its end (see
    :func:`~conversations.tools.execute`); the loop awaits those with
    :func:`execute_call_async` instead. The files of a
    :class:`~conversations.tools.ToolResult` are stored here, before the
    outcome is handed over (see ``tool_files``).
    """
    started = timezone.now()
    try:
        # Checked by check_call before the call was marked running (the loop's only path here).
        result = execute_result(tool, row.arguments, context=_context(run, row), checked=True)
        parts = store_tool_files(conversation_id=run.conversation_id, files=result.files)
    except CallPending:
        return CallOutcome(row, ToolCallRow.Status.AWAITING_APPROVAL, "", started_at=started)
    except Exception as exc:
        return _failed(exc, run=run, row=row, started=started)
    return _succeeded(result, parts, row=row, started=started)


async def execute_call_async(*, run: Run, row: ToolCallRow, tool: Tool) -> CallOutcome:
    """:func:`execute_call` on an event loop: the tool is awaited; the same answers.

    Only agent tools raise :class:`CallPending`, and they are synchronous
    (their child run goes through :func:`execute_call`), so here it would be
    an ordinary failure of the tool.
    """
    started = timezone.now()
    try:
        result = await execute_result_async(
            tool, row.arguments, context=_context(run, row), checked=True
        )
        parts = await sync_to_async(store_tool_files)(
            conversation_id=run.conversation_id, files=result.files
        )
    except Exception as exc:
        return _failed(exc, run=run, row=row, started=started)
    return _succeeded(result, parts, row=row, started=started)


def _succeeded(
    result: ToolResult, parts: tuple[FilePart, ...], *, row: ToolCallRow, started: datetime
) -> CallOutcome:
    content = _storable_result(result.text, row=row)
    return CallOutcome(
        row,
        ToolCallRow.Status.SUCCEEDED,
        content,
        started_at=started,
        finished_at=timezone.now(),
        parts=parts,
    )


def _failed(exc: Exception, *, run: Run, row: ToolCallRow, started: datetime) -> CallOutcome:
    """The answer to a tool that raised; called inside the ``except`` block (for the traceback)."""
    if isinstance(exc, ToolError):
        logger.info("tool %s refused (call %s, run %s): %s", row.name, row.call_id, run.pk, exc)
        text = tool_error_text(TOOL_ERROR, row.name, message=exc.message)
        content = _storable_result(text, row=row)
    elif isinstance(exc, ToolFilesRefused):
        # Our own words about the files (never the tool's or the storage's).
        logger.info("tool %s (call %s, run %s): %s", row.name, row.call_id, run.pk, exc)
        text = tool_error_text(TOOL_ERROR, row.name, message=str(exc))
        content = _storable_result(text, row=row)
    else:
        logger.exception("tool %s failed (call %s, run %s)", row.name, row.call_id, run.pk)
        content = tool_error_text(TOOL_FAILED, row.name)
    return CallOutcome(
        row,
        ToolCallRow.Status.FAILED,
        content,
        error=traceback.format_exc(),
        started_at=started,
        finished_at=timezone.now(),
    )


def timed_out_call(*, row: ToolCallRow, seconds: float, started_at: datetime) -> CallOutcome:
    """The answer of a call still running when its timeout passed (its late result is dropped)."""
    return CallOutcome(
        row,
        ToolCallRow.Status.TIMED_OUT,
        timed_out_text(row.name, seconds),
        error=f"no result within {seconds:g} s; the call was abandoned and its result discarded",
        started_at=started_at,
        finished_at=timezone.now(),
    )


def timed_out_text(name: str, seconds: float) -> str:
    """What the model reads about a call that ran past its timeout."""
    return tool_error_text(TOOL_TIMED_OUT, name, seconds=f"{seconds:g}")


def _storable_result(text: str, *, row: ToolCallRow) -> str:
    """A result the database can hold (NUL and lone surrogates become U+FFFD), cut to size.

    Made storable before it is written: a result refused by the database
    after the tool ran would be lost, and the model told the call never completed.
    """
    cleaned, replaced = storable_text(str(text))
    if replaced:
        logger.warning(
            "tool %s (call %s): unstorable characters in the result replaced by U+FFFD",
            row.name,
            row.call_id,
        )
    return truncate_result(cleaned, app_settings().TOOL_RESULT_MAX_BYTES)


def storage_failed(*, outcome: CallOutcome, detail: str) -> CallOutcome:
    """What a call's outcome becomes when its result could not be stored.

    A tool that ran is never reported as interrupted (the model might run it
    again): it ends ``failed``, the model reads the fixed failure sentence and
    admins the reason. Answers to calls that never ran are kept as they are.
    """
    if outcome.started_at is None:
        return outcome
    return dataclasses.replace(
        outcome,
        parts=(),
        status=ToolCallRow.Status.FAILED,
        content=tool_error_text(TOOL_FAILED, outcome.row.name),
        error=f"the result could not be stored:\n{detail}",
    )


def persist_outcomes(
    *,
    run: Run,
    outcomes: Sequence[CallOutcome],
    tail: TranscriptTail | None = None,
    messages: Sequence[ChatMessage] | None = None,
) -> Held | None:
    """Store every result and call status of a turn, and the heartbeat, in one transaction.

    Raises :class:`~conversations.exceptions.RunFencedOut` (nothing written)
    when this process no longer holds ``run``. With the conversation's
    ``tail`` (the loop holds the conversation) the stored rows are not read
    again, and what the fence read is returned (see ``hot_path``).
    ``messages``: the outcomes' :meth:`~CallOutcome.to_message`, when the
    caller has built them already (the loop keeps them as its history).
    """
    now = timezone.now()
    for outcome in outcomes:
        row = outcome.row
        row.status = outcome.status
        row.error = outcome.error
        row.started_at = outcome.started_at or row.started_at
        row.finished_at = outcome.finished_at or now
    if messages is None:
        messages = [outcome.to_message() for outcome in outcomes]
    with transaction.atomic():
        if tail is None:
            # Fenced: a process whose run was ended meanwhile writes nothing.
            hold_run(run)
            append_messages(conversation=run.conversation, messages=messages, run=run)
            held = None
        else:
            held = hold_for_results(run, [outcome.row for outcome in outcomes])
            append_after(
                conversation=run.conversation, messages=messages, tail=tail, run=run, touch=False
            )
        if held is None or not held.states_stored:
            update_call_states([outcome.row for outcome in outcomes])
    return held


def answer_open_calls(
    *, conversation: Conversation, status: str, run: Run | None = None
) -> list[ToolCallRow]:
    """Answer every unanswered call of ``conversation`` and mark it ``status``.

    ``status`` is ``interrupted`` or ``cancelled``; the answer says so in
    words the model understands, flagged ``is_error``. Returns the calls answered.
    """
    with transaction.atomic():
        # Lock the conversation first, in the same order as append_messages,
        # so two writers never wait on each other's locks (no deadlock).
        list(Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk"))
        open_calls = list(
            ToolCallRow.objects.filter(conversation=conversation, results__isnull=True).order_by(
                "message__position", "index"
            )
        )
        if not open_calls:
            return []
        now = timezone.now()
        append_messages(
            conversation=conversation,
            messages=[
                ChatMessage.tool_result(
                    call.call_id, answer_text_for(status, call.name), is_error=True
                )
                for call in open_calls
            ],
            run=run,
        )
        for call in open_calls:
            call.status = status
            call.finished_at = now
        ToolCallRow.objects.bulk_update(open_calls, ["status", "finished_at"])
    logger.info(
        "answered %d open call(s) of conversation %s as %s",
        len(open_calls),
        conversation.pk,
        status,
    )
    return open_calls
