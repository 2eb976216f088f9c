"""Anthropic's streamed Messages answer (``"stream": true``), folded back into one response.

The stream is a sequence of Server-Sent Events, each naming its ``type`` in
its data: ``message_start`` carries the message without content (id, model,
the input side of ``usage``); each content block then arrives as
``content_block_start`` (a ``text``, ``thinking``, ``redacted_thinking`` or
``tool_use`` block, the last with its id and name and an empty ``input``),
any number of ``content_block_delta`` (``text_delta``, ``thinking_delta``,
``signature_delta``, ``input_json_delta`` whose ``partial_json`` pieces join
into the call's input, ``citations_delta``) and ``content_block_stop``;
``message_delta`` brings ``stop_reason`` and the final ``usage`` counts, and
``message_stop`` ends the answer. ``ping`` keeps the connection alive and an
``error`` event reports a failure after the 200 status (see
:mod:`.stream_support`); event types we do not know are skipped, as the API
asks of its clients.

:class:`AnthropicStreamParser` shows the text, the thinking and each call's
input as they arrive and rebuilds the body the same answer would have had
sent whole (blocks in order, thinking with its signature, each ``tool_use``
with its input decoded from the joined pieces); the response is that body
through the adapter's ``parse_response``, so a streamed answer and a whole one
cannot differ.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Final

from conversations.domain import CompletionResponse, ReasoningDelta, TextDelta, ToolCallDelta
from conversations.exceptions import ProviderResponseError

from .stream_support import StreamCallIds, record_index, stream_error
from .stream_support import record_object as _mapping
from .stream_support import record_text as _text
from .streaming import Delta

__all__ = ["ERROR_STATUSES", "AnthropicStreamParser"]

ERROR_STATUSES: Final[Mapping[str, int]] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status each of Anthropic's error types stands for."""

Block = dict[str, Any]


def _index(value: Any) -> int:
    return record_index(value, "a content block index")


def _input(block: Mapping[str, Any], pieces: list[str]) -> Any:
    """A call's ``input`` as the whole body would hold it.

    No pieces keep the start block's input (``{}``); joined pieces that are
    JSON become that value, and text that is not JSON stays text, which
    ``parse_response`` keeps as the call's raw arguments.
    """
    joined = "".join(pieces)
    if not joined:
        return block.get("input", {})
    try:
        return json.loads(joined)
    except ValueError:
        return joined


class AnthropicStreamParser:
    """Folds one streamed Messages answer into deltas, then into the parsed response."""

    def __init__(
        self,
        parse: Callable[[Mapping[str, Any]], CompletionResponse],
        *,
        known_ids: Collection[str] = (),
        redact: Callable[[str], str],
        provider: str = "anthropic",
    ) -> None:
        self._parse = parse
        self._redact = redact
        self._provider = provider
        self._message: dict[str, Any] = {}
        self._blocks: dict[int, Block] = {}
        self._pieces: dict[int, list[str]] = {}
        self._calls: dict[int, int] = {}  # block index -> position among the turn's calls
        self._ids = StreamCallIds(known_ids)
        self._stopped = False

    # The protocol -------------------------------------------------------------

    def progress(self) -> object:
        """What has been said beside the blocks (start, usage, stop): changes count as news."""
        # A snapshot: the message is updated in place.
        return (repr(self._message), len(self._blocks), self._stopped)

    def feed(self, event: str, data: str) -> Iterator[Delta]:
        """The deltas of one event; a malformed one raises ``KeyError``/``TypeError``/``ValueError``."""
        record = _mapping(json.loads(data), "an event")
        kind = record.get("type", event)
        match kind:
            case "message_start":
                self._start_message(_mapping(record["message"], "message"))
            case "content_block_start":
                yield from self._start_block(
                    _index(record["index"]), _mapping(record["content_block"], "content_block")
                )
            case "content_block_delta":
                yield from self._delta(_index(record["index"]), _mapping(record["delta"], "delta"))
            case "content_block_stop":
                yield from self._stop_block(_index(record["index"]))
            case "message_delta":
                self._message_delta(record)
            case "message_stop":
                self._stopped = True
            case "error":
                raise self._error(record.get("error"))
            case _:
                pass  # ping, and event types added after this adapter was written

    def finish(self) -> CompletionResponse:
        """The whole answer; :class:`ProviderResponseError` when ``message_stop`` never came."""
        if not self._stopped:
            raise ProviderResponseError(
                f"{self._provider}: the stream ended before its message_stop event"
            )
        return self._parse(self.body())

    def body(self) -> dict[str, Any]:
        """The Messages response body the answer so far amounts to."""
        body = copy.deepcopy(self._message)
        content: list[Block] = []
        for index in sorted(self._blocks):
            block = copy.deepcopy(self._blocks[index])
            if index in self._pieces:
                block["input"] = _input(block, self._pieces[index])
            if index in self._calls:
                block["id"] = self._ids.assigned[self._calls[index]]
            content.append(block)
        body["content"] = content
        return body

    # Events -------------------------------------------------------------------

    def _start_message(self, message: Mapping[str, Any]) -> None:
        self._message = copy.deepcopy(dict(message))
        self._message.pop("content", None)  # the blocks arrive as events of their own

    def _start_block(self, index: int, block: Mapping[str, Any]) -> Iterator[Delta]:
        if index in self._blocks:
            raise ValueError(f"content block {index} started twice")
        self._blocks[index] = copy.deepcopy(dict(block))
        match block.get("type"):
            case "text":
                if text := _text(block.get("text", ""), "text"):
                    yield TextDelta(text)
            case "thinking":
                if thinking := _text(block.get("thinking", ""), "thinking"):
                    yield ReasoningDelta(thinking)
            case "tool_use":
                self._pieces[index] = []
                name = block.get("name")
                if isinstance(name, str) and name:
                    # A call without a name is dropped by parse_response: no delta either.
                    self._calls[index] = len(self._ids.assigned)
                    call_id = self._ids.next(block.get("id"))
                    yield ToolCallDelta(self._calls[index], call_id, name, "")

    def _delta(self, index: int, delta: Mapping[str, Any]) -> Iterator[Delta]:
        block = self._blocks[index]
        match delta.get("type"):
            case "text_delta":
                text = _text(delta["text"], "text")
                block["text"] = _text(block.get("text", ""), "text") + text
                if text and block.get("type") == "text":
                    yield TextDelta(text)
            case "thinking_delta":
                thinking = _text(delta["thinking"], "thinking")
                block["thinking"] = _text(block.get("thinking", ""), "thinking") + thinking
                if thinking and block.get("type") == "thinking":
                    yield ReasoningDelta(thinking)
            case "signature_delta":
                signature = _text(delta["signature"], "signature")
                block["signature"] = _text(block.get("signature", ""), "signature") + signature
            case "input_json_delta":
                piece = _text(delta["partial_json"], "partial_json")
                self._pieces.setdefault(index, []).append(piece)
                if piece and index in self._calls:
                    yield ToolCallDelta(self._calls[index], arguments=piece)
            case "citations_delta":
                citations = block.setdefault("citations", [])
                if not isinstance(citations, list):
                    raise TypeError("citations is not a list")
                citations.append(copy.deepcopy(delta.get("citation")))
            case _:
                pass  # a delta type added after this adapter was written

    def _stop_block(self, index: int) -> Iterator[Delta]:
        block = self._blocks[index]
        if index in self._calls and not "".join(self._pieces.get(index, ())):
            # No input pieces: the call's arguments are the start block's input
            # (``{}``); show them so the joined pieces equal the stored arguments.
            shown = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
            yield ToolCallDelta(self._calls[index], arguments=shown)

    def _message_delta(self, record: Mapping[str, Any]) -> None:
        delta = _mapping(record.get("delta") or {}, "delta")
        self._message.update(copy.deepcopy(dict(delta)))
        usage = record.get("usage")
        if usage is not None:
            # The counts are cumulative; the input side may only come with message_start.
            merged = dict(_mapping(self._message.get("usage") or {}, "usage"))
            merged.update({k: v for k, v in _mapping(usage, "usage").items() if v is not None})
            self._message["usage"] = merged

    def _error(self, error: Any) -> Exception:
        error = error if isinstance(error, Mapping) else {}
        kind = error.get("type")
        kind = kind if isinstance(kind, str) and kind else "error"
        message = error.get("message")
        return stream_error(
            self._provider,
            ERROR_STATUSES.get(kind),
            kind,
            message if isinstance(message, str) else "",
            redact=self._redact,
        )
