"""The persisted events of a run, derived from its rows (the replayable part of its stream).

Every event is computed from rows (the run, its messages and their calls), so
a client attached to any web process sees the same events, and a
reconnecting client resumes exactly where it stopped.

Event ids are numbers made from message positions (``STRIDE`` = 100,000)::

    run_started         P * STRIDE            P = position of the run's first message
    assistant_turn      p * STRIDE + 1        the assistant message at position p
    tool_call_started   p * STRIDE + 2 + i    call i of that message, once it was marked running
    tool_call_finished  q * STRIDE + 1        the tool message (its result) at position q
    output              L * STRIDE + 99,998   a completed run's validated structured output
    run_finished        L * STRIDE + 99,999   L = position of the run's last message

    approval.requested  p * STRIDE + 33,000 + i   call i of a held turn, needing approval
    approval.decided    p * STRIDE + 66,000 + i   the same, once no call of the turn is pending

The tools a provider ran itself and the sources it cited are written with
their assistant turn, in its transaction, so they travel in that turn's
``assistant_turn`` event (its ``message`` has ``provider_tool_calls`` and
``citations``) rather than in events of their own: no id between the
turn's and its first call's is free for them.

(A run that ended without any message has ``run_started`` 0 and
``run_finished`` 99,999.) A call index fits a ``smallint``, so the slots of one
position never overlap each other or the next position.

A turn held for approval is stored with its calls and their approvals in one
transaction, and the decision that leaves none of them pending is committed
before any of its calls runs; so the ``approval.decided`` events of a turn
appear together, and its calls get no ``tool_call_started`` event (their
``started_at`` is written after the decisions, at lower ids than the
requests already sent): their results still arrive as ``tool_call_finished``.
A run waiting for approval has not ended: the stream stays open.

The ids only ever grow in the order the loop commits the rows: an assistant
turn (with its calls, ``pending``), then one ``UPDATE`` marking the calls that
will execute ``running`` (rejected calls never are, so they never get a
started event), then their results at later positions, and the run's status
in the same transaction as its last messages. A poll reads the run first,
then the messages, then their calls, each statement seeing at least what the
previous one saw, so it never sees a row without the rows committed before
it. Hence an event with an id lower than one already sent never appears
later, and ``Last-Event-ID: N`` means exactly "every event after N".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.models import Max, Min, Prefetch

from conversations.models import (
    BUSY_RUN_STATUSES,
    Citation,
    Message,
    MessageAttachment,
    ProviderToolCall,
    Run,
    ToolApproval,
    ToolCall,
)
from conversations.selectors import with_agent_conversation

__all__ = ["STRIDE", "RowEvents", "RunEvent"]

STRIDE = 100_000
"""Event ids per message position (see the module docstring)."""

_REQUESTED = 33_000
_DECIDED = 66_000


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One Server-Sent Event: its id (``None`` for the live ones, never stored), type and data."""

    id: int | None
    type: str
    data: dict[str, Any]

    def encode(self) -> bytes:
        """The event on the wire (JSON never contains a raw newline, so one data line)."""
        payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        line = "" if self.id is None else f"id: {self.id}\n"
        return f"{line}event: {self.type}\ndata: {payload}\n\n".encode()


def _call_slots(message: Message, base: int) -> list[tuple[int, str, Any]]:
    """The call events of one assistant turn: started, or requested/decided when it was held."""
    approvals: list[tuple[ToolCall, ToolApproval]] = []
    for call in message.tool_calls.all():
        try:
            approvals.append((call, call.approval))
        except ToolApproval.DoesNotExist:
            continue
    if not approvals:
        return [
            (base + 2 + call.index, "tool_call_started", (message, call))
            for call in message.tool_calls.all()
            if call.started_at is not None
        ]
    slots: list[tuple[int, str, Any]] = [
        (base + _REQUESTED + call.index, "approval.requested", (message, approval))
        for call, approval in approvals
    ]
    if all(approval.decision for _, approval in approvals):
        slots.extend(
            (base + _DECIDED + call.index, "approval.decided", (message, approval))
            for call, approval in approvals
        )
    return slots


class RowEvents:
    """The persisted events of one run after a given id, read from the database poll by poll."""

    def __init__(self, run_id: UUID, *, after: int = -1) -> None:
        self.run_id = run_id
        self.after = after
        self.finished = False
        self._first_position: int | None = None

    def poll(self) -> list[RunEvent]:
        """The events stored since the last one returned; sets ``finished`` after the last."""
        found = Run.objects.filter(pk=self.run_id).values_list("status", "output_schema_id").first()
        if found is None:  # deleted with its conversation
            self.finished = True
            return []
        status, schema_id = found
        ended = status not in BUSY_RUN_STATUSES
        floor = max(self.after, 0) // STRIDE
        calls = with_agent_conversation(calls=ToolCall.objects.select_related("approval"))
        messages = list(
            Message.objects.filter(run_id=self.run_id, position__gte=floor)
            .select_related("tool_call", "model_call")
            .prefetch_related(
                Prefetch("tool_calls", queryset=calls),
                # The assistant turn's event carries them (see the module's docstring).
                Prefetch(
                    "provider_tool_calls", queryset=ProviderToolCall.objects.order_by("index")
                ),
                Prefetch("citations", queryset=Citation.objects.order_by("index")),
                # The messages' files, as references (never bytes) in the events.
                Prefetch(
                    "attachment_links",
                    queryset=MessageAttachment.objects.select_related("attachment").order_by(
                        "position"
                    ),
                ),
            )
            .order_by("position")
        )
        first = self._first(messages, floor)
        slots: list[tuple[int, str, Any]] = []
        if first is not None or ended:
            opening = messages[0] if messages and messages[0].position == first else None
            slots.append(((first or 0) * STRIDE, "run_started", opening))
        for message in messages:
            base = message.position * STRIDE
            if message.role == Message.Role.ASSISTANT:
                slots.append((base + 1, "assistant_turn", message))
                slots.extend(_call_slots(message, base))
            elif message.role == Message.Role.TOOL:
                slots.append((base + 1, "tool_call_finished", message))
        finished_id = None
        if ended:
            last = self._last(messages, first)
            finished_id = (last or 0) * STRIDE + STRIDE - 1
            if status == Run.Status.COMPLETED and schema_id is not None:
                slots.append((finished_id - 1, "output", None))
            slots.append((finished_id, "run_finished", None))
        events = self._render(sorted((s for s in slots if s[0] > self.after), key=lambda s: s[0]))
        if events is None:  # deleted meanwhile
            self.finished = True
            return []
        if events:
            self.after = int(events[-1].id or 0)
        self.finished = finished_id is not None and self.after >= finished_id
        return events

    def _first(self, messages: Sequence[Message], floor: int) -> int | None:
        if self._first_position is None:
            if floor == 0:
                self._first_position = messages[0].position if messages else None
            else:
                found = Message.objects.filter(run_id=self.run_id).aggregate(p=Min("position"))
                self._first_position = found["p"]
        return self._first_position

    def _last(self, messages: Sequence[Message], first: int | None) -> int | None:
        if messages:
            return messages[-1].position
        if first is None:
            return None
        last: int | None = Message.objects.filter(run_id=self.run_id).aggregate(p=Max("position"))[
            "p"
        ]
        return last

    def _render(self, slots: Sequence[tuple[int, str, Any]]) -> list[RunEvent] | None:
        from conversations.selectors import runs_with_calls

        from ..approval_serializers import ApprovalSerializer
        from ..message_parts import ToolCallSerializer
        from ..serializers import MessageSerializer, RunSerializer

        run_data: dict[str, Any] | None = None
        if any(kind in ("run_started", "run_finished", "output") for _, kind, _ in slots):
            run = runs_with_calls(runs=Run.objects.filter(pk=self.run_id)).first()
            if run is None:
                return None
            run_data = RunSerializer(run).data
        events = []
        for event_id, kind, subject in slots:
            data: dict[str, Any]
            if kind == "run_started":
                opening = (
                    subject if subject is not None and subject.role == Message.Role.USER else None
                )
                data = {
                    "run": run_data,
                    "message": MessageSerializer(opening).data if opening is not None else None,
                }
            elif kind == "run_finished":
                data = {"run": run_data}
            elif kind == "output":
                assert run_data is not None  # read above for this kind
                data = {"output": run_data["output"], "output_schema": run_data["output_schema"]}
            elif kind == "assistant_turn":
                data = {"message": MessageSerializer(subject).data}
            elif kind == "tool_call_started":
                message, call = subject
                data = {"position": message.position, "call": ToolCallSerializer(call).data}
            elif kind in ("approval.requested", "approval.decided"):
                message, approval = subject
                data = {"position": message.position, "approval": ApprovalSerializer(approval).data}
            else:  # tool_call_finished
                data = {
                    "message": MessageSerializer(subject).data,
                    "call": ToolCallSerializer(subject.tool_call).data,
                }
            events.append(RunEvent(event_id, kind, data))
        return events
