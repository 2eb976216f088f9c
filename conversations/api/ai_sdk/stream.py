"""A run as the Vercel AI SDK's UI message stream: live deltas and stored rows become chunks.

:class:`ChatStream` follows one run. It maps the deltas the loop publishes
(``conversations.events``) and the rows it stores to the chunks ``useChat``
reads (``start``, ``start-step``, ``text-*``, ``reasoning-*``, ``tool-*``,
``finish-step``, ``error``, ``finish``), then ``[DONE]``. Deltas only show
progress: each stored assistant message completes (or, when nothing
streamed, supplies) its step's text, and its calls become
``tool-input-available`` with the stored arguments; each stored result becomes
``tool-output-available`` (``tool-output-error`` when it reports a failure).

The whole run is one assistant UI message, one step per model call, whose id
is ``run-<run id>`` (the stored messages do not exist yet when the
stream starts); ``GET .../chat/`` groups the stored rows under the same id.

Should a read find the connection pool dry (no connection within its
timeout), the response ends as a whole stream does, with an ``error`` chunk
saying the service is busy, ``finish`` and ``[DONE]``, instead of breaking
off: the run goes on, and the history (``GET``) shows it when loaded again.

Rows are read when the loop says it committed some (``changed``) and, as a
fallback, as often as the run event stream reads them (every half second
with the in-process bus, every five seconds with a bus between processes,
which announces every commit). Under WSGI the stream waits in its
request thread; under ASGI it waits on the event loop and borrows a pool
thread only for each read.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections

from conversations import events, selectors
from conversations.database import database_busy
from conversations.models import BUSY_RUN_STATUSES, Message, Run, ToolApproval, ToolCall

from ..sse.slots import release_connections
from ..sse.stream import FALLBACK_POLL_SECONDS, POLL_SECONDS
from .agents import AgentParts
from .chunks import (
    DONE,
    FAILED_STATUSES,
    Chunk,
    encode,
    error_text,
    finish_reason,
    run_message_id,
    source_urls,
    thinking_texts,
)

__all__ = ["KEEPALIVE_SECONDS", "MAX_STREAM_SECONDS", "ChatStream"]

_T = TypeVar("_T")

KEEPALIVE_SECONDS = 15.0
"""A comment line after this much silence keeps proxies from closing the connection."""
MAX_STREAM_SECONDS = 3600.0
"""A response lasts at most this long; the history (``GET``) has whatever came after."""


@dataclass
class _ToolInput:
    """A call of the open step as its deltas arrive."""

    id: str | None = None
    name: str | None = None
    buffered: str = ""
    started: bool = False


@dataclass
class _Step:
    """The model call the stream is showing."""

    number: int
    text_id: str | None = None
    text: str = ""
    reasoning_id: str | None = None
    tools: dict[int, _ToolInput] = field(default_factory=dict)
    stored: bool = False
    pending: set[str] = field(default_factory=set)


class ChatStream:
    """The chunks of one run, from its deltas and its stored rows."""

    poll_seconds: float | None = None
    """Seconds between two reads of the rows when nothing is announced (``None``: the default)."""
    keepalive_seconds = KEEPALIVE_SECONDS
    max_seconds = MAX_STREAM_SECONDS

    def __init__(self, run: Run, subscription: events.Subscription) -> None:
        self.run = run
        self.run_id = run.pk
        self.subscription = subscription
        self.finished = False
        self._after = -1
        self._steps = 0
        self._step: _Step | None = None
        self._last_seq = -1
        self._aliases: dict[str, str] = {}
        self._message_ids: list[int] = []
        self._position: int | None = None
        self._tool_call_pks: dict[str, int] = {}
        self._last_finish_reason = ""
        self._quiet = False
        self._done = False
        self._agents = AgentParts()
        self._started = self._last_write = time.monotonic()
        for message in selectors.run_messages(run=run):
            if message.role == Message.Role.USER:
                self._after = max(self._after, message.position)

    # What the stream says ------------------------------------------------------------

    def opening(self) -> list[Chunk]:
        """``start``, then whatever an answer already streaming has shown."""
        chunks: list[Chunk] = [
            {
                "type": "start",
                "messageId": run_message_id(self.run_id),
                "messageMetadata": {"runId": str(self.run_id)},
            }
        ]
        snapshot = events.inflight(self.run_id)
        if snapshot:
            chunks += self._from_snapshot(snapshot)
        return chunks + self.poll()

    def on_event(self, event: events.LiveEvent) -> list[Chunk]:
        """The chunks one published event adds.

        Once a read of the rows showed an assistant message, deltas are
        dropped until the next ``changed``: the ones still queued were
        published before that message was stored (they belong to it), and
        the next answer's deltas always follow a ``changed`` of its own.
        """
        if event.type.startswith(events.AGENT_PREFIX):
            return [] if self.finished else self._agents.on_event(event)
        if event.type not in events.DELTA_TYPES:
            self._quiet = False
            return self.poll()  # "changed", or anything else: look at the rows
        seq = event.data.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool):
            if seq <= self._last_seq:
                return []
            self._last_seq = seq
        if self._quiet or self.finished:
            return []
        return self._delta(event.type, event.data)

    def poll(self) -> list[Chunk]:
        """The chunks of the rows stored since the last read; the end once the run ended."""
        if self.finished:
            return []
        row = Run.objects.filter(pk=self.run_id).values_list(
            "status", "error_code", "error_message", "output_schema_id", "output"
        )
        found = row.first()
        if found is None:  # deleted with its conversation
            return self._end(Run.Status.FAILED, "not_found", "")
        status, code, message, schema_id, output = found
        chunks: list[Chunk] = []
        for stored in selectors.run_messages(run=self.run):
            if stored.position > self._after:
                chunks += self._stored(stored)
                self._after = stored.position
        if status == Run.Status.COMPLETED and schema_id is not None:
            # The validated structured output (a completed run with a schema has one).
            chunks.append({"type": "data-output", "id": "output", "data": output})
        if status not in BUSY_RUN_STATUSES or status == Run.Status.AWAITING_APPROVAL:
            chunks += self._end(status, code, message)
        return chunks

    # Deltas -----------------------------------------------------------------------------

    def _from_snapshot(self, snapshot: dict[str, Any]) -> list[Chunk]:
        chunks: list[Chunk] = []
        if snapshot.get("reasoning"):
            chunks += self._delta("reasoning.delta", {"text": snapshot["reasoning"]})
        if snapshot.get("text"):
            chunks += self._delta("text.delta", {"text": snapshot["text"]})
        for call in snapshot.get("tool_calls") or ():
            if isinstance(call, dict):
                chunks += self._delta("tool_call.delta", call)
        seq = snapshot.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool):
            self._last_seq = seq
        return chunks

    def _open_step(self) -> tuple[_Step, list[Chunk]]:
        if self._step is not None:
            return self._step, []
        self._steps += 1
        self._step = _Step(self._steps)
        return self._step, [{"type": "start-step"}]

    def _delta(self, kind: str, data: dict[str, Any]) -> list[Chunk]:
        text = data.get("text")
        if kind == "tool_call.delta":
            return self._tool_delta(data)
        if not isinstance(text, str) or not text:
            return []
        step, chunks = self._open_step()
        if kind == "reasoning.delta":
            if step.reasoning_id is None:
                step.reasoning_id = f"reasoning-{step.number}"
                chunks.append({"type": "reasoning-start", "id": step.reasoning_id})
            chunks.append({"type": "reasoning-delta", "id": step.reasoning_id, "delta": text})
            return chunks
        chunks += self._close_reasoning(step)
        if step.text_id is None:
            step.text_id = f"text-{step.number}"
            chunks.append({"type": "text-start", "id": step.text_id})
        step.text += text
        chunks.append({"type": "text-delta", "id": step.text_id, "delta": text})
        return chunks

    def _tool_delta(self, data: dict[str, Any]) -> list[Chunk]:
        index = data.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            return []
        step, chunks = self._open_step()
        tool = step.tools.setdefault(index, _ToolInput())
        if isinstance(data.get("id"), str) and data["id"] and tool.id is None:
            tool.id = data["id"]
        if isinstance(data.get("name"), str) and data["name"] and tool.name is None:
            tool.name = data["name"]
        fragment = data.get("arguments")
        if isinstance(fragment, str):
            tool.buffered += fragment
        if not tool.started and tool.id is not None and tool.name is not None:
            tool.started = True
            chunks.append(
                {"type": "tool-input-start", "toolCallId": tool.id, "toolName": tool.name}
            )
        if tool.started and tool.buffered:
            chunks.append(
                {"type": "tool-input-delta", "toolCallId": tool.id, "inputTextDelta": tool.buffered}
            )
            tool.buffered = ""
        return chunks

    def _close_reasoning(self, step: _Step) -> list[Chunk]:
        part, step.reasoning_id = step.reasoning_id, None
        return [] if part is None else [{"type": "reasoning-end", "id": part}]

    def _close_text(self, step: _Step) -> list[Chunk]:
        part, step.text_id = step.text_id, None
        return [] if part is None else [{"type": "text-end", "id": part}]

    def _close_step(self) -> list[Chunk]:
        step, self._step = self._step, None
        if step is None:
            return []
        return [*self._close_reasoning(step), *self._close_text(step), {"type": "finish-step"}]

    # Rows -------------------------------------------------------------------------------

    def _stored(self, message: Message) -> list[Chunk]:
        if message.role == Message.Role.ASSISTANT:
            self._quiet = True
            self._message_ids.append(message.pk)
            self._position = message.position
            self._last_finish_reason = message.finish_reason
            return self._assistant(message)
        if message.role == Message.Role.TOOL and message.tool_call is not None:
            self._message_ids.append(message.pk)
            return self._result(message, message.tool_call)
        return []

    def _assistant(self, message: Message) -> list[Chunk]:
        if self._step is not None and self._step.stored:
            self._close_step()  # its results never came (cannot happen in a valid history)
        step, chunks = self._open_step()
        step.stored = True
        if step.reasoning_id is None and not step.text and not step.tools:
            for number, text in enumerate(thinking_texts(message)):
                part = f"reasoning-{step.number}" + (f"-{number}" if number else "")
                chunks += [
                    {"type": "reasoning-start", "id": part},
                    {"type": "reasoning-delta", "id": part, "delta": text},
                    {"type": "reasoning-end", "id": part},
                ]
        chunks += self._close_reasoning(step)
        content = message.content
        if step.text_id is None and content and not step.text:
            step.text_id = f"text-{step.number}"
            chunks.append({"type": "text-start", "id": step.text_id})
        if step.text_id is not None and content.startswith(step.text) and content != step.text:
            chunks.append(
                {"type": "text-delta", "id": step.text_id, "delta": content[len(step.text) :]}
            )
            step.text = content
        chunks += self._close_text(step)
        chunks += source_urls(message)
        calls: list[ToolCall] = list(message.tool_calls.all())
        streamed = {tool.id: tool for tool in step.tools.values() if tool.started}
        for call in calls:
            tool = step.tools.get(call.index)
            shown = tool.id if tool is not None and tool.started and tool.id else call.call_id
            if shown not in streamed and call.call_id in streamed:
                shown = call.call_id
            self._aliases[call.call_id] = shown
            self._tool_call_pks[shown] = call.pk
            chunks.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": shown,
                    "toolName": call.name,
                    "input": call.arguments,
                }
            )
            step.pending.add(call.call_id)
        if not calls:
            chunks += self._close_step()
        return chunks

    def _result(self, message: Message, call: ToolCall) -> list[Chunk]:
        shown = self._aliases.get(call.call_id, call.call_id)
        chunk: Chunk
        if message.is_error:
            chunk = {"type": "tool-output-error", "toolCallId": shown, "errorText": message.content}
        else:
            chunk = {
                "type": "tool-output-available",
                "toolCallId": shown,
                "output": message.content,
            }
        chunks = [chunk]
        step = self._step
        if step is not None:
            step.pending.discard(call.call_id)
            if step.stored and not step.pending:
                chunks += self._close_step()
        return chunks

    def _end(self, status: str, code: str, message: str) -> list[Chunk]:
        chunks: list[Chunk] = []
        if status == Run.Status.AWAITING_APPROVAL:
            chunks += self._approval_requests()
        chunks += self._close_step()
        if status in FAILED_STATUSES or code == "not_found":
            chunks.append({"type": "error", "errorText": error_text(status, code, message)})
        chunks.append(
            {
                "type": "finish",
                "finishReason": finish_reason(status, self._last_finish_reason),
                "messageMetadata": {
                    "runId": str(self.run_id),
                    "runStatus": status,
                    "messageIds": list(self._message_ids),
                    # What the feedback endpoints take: the answer's position, each call's pk.
                    "position": self._position,
                    "toolCalls": dict(self._tool_call_pks),
                },
            }
        )
        self.finished = True
        return chunks

    def _approval_requests(self) -> list[Chunk]:
        step = self._step
        if step is None or not step.pending:
            return []
        approvals = ToolApproval.objects.filter(
            run_id=self.run_id, tool_call__call_id__in=step.pending, decision=""
        ).select_related("tool_call")
        return [
            {
                "type": "tool-approval-request",
                "approvalId": str(approval.pk),
                "toolCallId": self._aliases.get(
                    approval.tool_call.call_id, approval.tool_call.call_id
                ),
            }
            for approval in approvals
        ]

    # Transports -------------------------------------------------------------------------

    def iter_sync(self) -> Iterator[bytes]:
        """The stream for WSGI: waits for events in the request thread."""
        try:
            frame: bytes | None = self._frame(self.opening())
            while frame is not None:
                release_connections()
                if frame:
                    yield frame
                frame = self._next(self.subscription.get(self._wait()))
        except DatabaseError as exc:
            if not database_busy(exc):
                raise
            release_connections()
            yield self._busy()
        finally:
            self.subscription.close()

    async def iter_async(self) -> AsyncIterator[bytes]:
        """The stream for ASGI: waits on the event loop, reads rows in the shared pool."""
        read = sync_to_async(self._read_and_close, thread_sensitive=False)
        try:
            frame: bytes | None = self._frame(await read(self.opening))
            while frame is not None:
                if frame:
                    yield frame
                event = await self.subscription.aget(self._wait())
                frame = await read(partial(self._next, event))
        except DatabaseError as exc:
            if not database_busy(exc):
                raise
            yield self._busy()
        finally:
            self.subscription.close()

    def _wait(self) -> float:
        if self.poll_seconds is not None:
            return self.poll_seconds
        return FALLBACK_POLL_SECONDS if events.backend().spans_processes else POLL_SECONDS

    def _next(self, event: events.LiveEvent | None) -> bytes | None:
        """What to send after a wait (``b""``: nothing yet); ``None`` once ``[DONE]`` was sent."""
        if self._done:
            return None
        if self.finished:
            self._done = True
            return DONE
        if time.monotonic() - self._started > self.max_seconds:
            return self._frame(self._timed_out())
        return self._frame(self.on_event(event) if event is not None else self.poll())

    def _frame(self, chunks: list[Chunk]) -> bytes:
        """The chunks on the wire; a keep-alive comment after a long silence."""
        now = time.monotonic()
        if chunks:
            self._last_write = now
            return encode(chunks)
        if now - self._last_write >= self.keepalive_seconds:
            self._last_write = now
            return b": keep-alive\n\n"
        return b""

    def _read_and_close(self, read: Callable[[], _T]) -> _T:
        # Each read is treated like a request: CONN_MAX_AGE decides whether the
        # pool thread keeps its connection, and a broken one is dropped.
        try:
            return read()
        finally:
            close_old_connections()

    def _busy(self) -> bytes:
        """The last words of a response that found no free database connection."""
        self.finished = self._done = True
        busy = "The service is busy. Load the conversation again in a moment: the run goes on."
        finish = {"type": "finish", "finishReason": "other"}
        return encode([*self._close_step(), {"type": "error", "errorText": busy}, finish]) + DONE

    def _timed_out(self) -> list[Chunk]:
        self.finished = True
        late = "The stream ended before the run; load the conversation again."
        finish = {"type": "finish", "finishReason": "other"}
        return [*self._close_step(), {"type": "error", "errorText": late}, finish]
