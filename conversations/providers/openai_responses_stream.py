"""The Responses API's streamed answer (``"stream": true``): typed events, folded into one response.

Each Server-Sent Event names its ``type`` in its data (and as the SSE event
name). The ones read here:

- ``response.output_item.added`` / ``response.output_item.done``: an output
  item (``message``, ``reasoning``, ``function_call``...) starts, then is
  complete; a ``function_call`` starts with its ``call_id`` and ``name``;
- ``response.output_text.delta`` and ``response.refusal.delta``: the text;
- ``response.reasoning_summary_text.delta``: the reasoning summary;
- ``response.function_call_arguments.delta``: a piece of a call's arguments;
- ``response.completed`` / ``response.incomplete``: the whole response, the
  same object a request without ``stream`` gets, which ends the answer;
- ``response.failed`` and ``error``: a failure after the 200 status (see
  :mod:`.stream_support`).

Every other event (``response.created``, ``response.in_progress``,
``*.done`` events repeating what the deltas said, types added later) is
skipped. :class:`ResponsesStreamParser` shows the deltas as they arrive and
answers with the adapter's ``parse_response`` of the final response, so a
streamed answer and a whole one cannot differ. A server that ends with an
empty ``output`` in its final event gets the items of its
``response.output_item.done`` events instead.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Final

from conversations.domain import CompletionResponse, ReasoningDelta, TextDelta, ToolCallDelta
from conversations.exceptions import ProviderError, ProviderResponseError

from .stream_support import StreamCallIds, record_index, stream_error
from .stream_support import record_object as _mapping
from .stream_support import record_text as _text
from .streaming import Delta

__all__ = ["ERROR_STATUSES", "SUMMARY_SEPARATOR", "ResponsesStreamParser", "response_error"]

ERROR_STATUSES: Final[Mapping[str, int]] = {
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "invalid_api_key": 401,
    "invalid_prompt": 400,
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
}
"""The HTTP status each of the API's error codes stands for (others: a server-side failure)."""

SUMMARY_SEPARATOR: Final = "\n\n"
"""Between two reasoning summary parts in ``thinking`` (whole and streamed alike)."""
_FINAL_EVENTS: Final = frozenset({"response.completed", "response.incomplete"})


def response_error(provider: str, error: Any, *, redact: Callable[[str], str]) -> ProviderError:
    """The error for a Responses ``error`` object (of a failed response or an ``error`` event)."""
    error = error if isinstance(error, Mapping) else {}
    code = error.get("code")
    code = code if isinstance(code, str) and code else "error"
    message = error.get("message")
    return stream_error(
        provider,
        ERROR_STATUSES.get(code),
        code,
        message if isinstance(message, str) else "",
        redact=redact,
    )


def _index(value: Any) -> int:
    return record_index(value, "an output_index")


class ResponsesStreamParser:
    """Folds one streamed Responses answer into deltas, then into the parsed response."""

    def __init__(
        self,
        parse: Callable[[Mapping[str, Any]], CompletionResponse],
        *,
        known_ids: Collection[str] = (),
        redact: Callable[[str], str],
        provider: str = "openai_responses",
    ) -> None:
        self._parse = parse
        self._redact = redact
        self._provider = provider
        self._ids = StreamCallIds(known_ids)
        self._calls: dict[int, int] = {}  # output_index -> position among the answer's calls
        self._shown_arguments: dict[int, str] = {}
        self._done_items: dict[int, dict[str, Any]] = {}
        self._summary_part: tuple[str, int] | None = None
        self._reasoning_shown = False
        self._final: dict[str, Any] | None = None

    # The protocol -------------------------------------------------------------

    def progress(self) -> object:
        """What has been said beside the deltas (call items, the final response): changes are news.

        A keep-alive comment, a lifecycle event or an unknown type changes none of it.
        """
        final = self._final
        end = None if final is None else (final.get("status"), repr(final.get("usage")))
        return (len(self._calls), len(self._done_items), end)

    def feed(self, event: str, data: str) -> Iterator[Delta]:
        """The deltas of one event; a malformed one raises ``KeyError``/``TypeError``/``ValueError``."""
        record = _mapping(json.loads(data), "an event")
        kind = record.get("type", event)
        match kind:
            case "response.output_item.added":
                index = _index(record["output_index"])
                yield from self._start_item(index, _mapping(record["item"], "item"))
            case "response.output_item.done":
                index = _index(record["output_index"])
                yield from self._finish_item(index, _mapping(record["item"], "item"))
            case "response.output_text.delta" | "response.refusal.delta":
                if text := _text(record["delta"], "delta"):
                    yield TextDelta(text)
            case "response.reasoning_summary_text.delta":
                yield from self._summary(record)
            case "response.function_call_arguments.delta":
                yield from self._arguments(_index(record["output_index"]), record["delta"])
            case kind if kind in _FINAL_EVENTS:
                self._final = copy.deepcopy(dict(_mapping(record["response"], "response")))
            case "response.failed":
                response = _mapping(record.get("response") or {}, "response")
                raise response_error(self._provider, response.get("error"), redact=self._redact)
            case "error":
                raise response_error(self._provider, record, redact=self._redact)
            case _:
                pass  # lifecycle events, *.done repeats, event types added later

    def finish(self) -> CompletionResponse:
        """The whole answer; :class:`ProviderResponseError` when no final event came."""
        if self._final is None:
            raise ProviderResponseError(
                f"{self._provider}: the stream ended before its response.completed event"
            )
        return self._parse(self.body())

    def body(self) -> dict[str, Any]:
        """The final response, with the streamed items when it came without any."""
        body = copy.deepcopy(self._final or {})
        if not body.get("output") and self._done_items:
            body["output"] = [self._done_items[index] for index in sorted(self._done_items)]
        return body

    # Events -------------------------------------------------------------------

    def _start_item(self, index: int, item: Mapping[str, Any]) -> Iterator[Delta]:
        if item.get("type") != "function_call":
            return
        name = item.get("name")
        if not isinstance(name, str) or not name:
            return  # dropped by parse_response: no delta either
        if index in self._calls:
            raise ValueError(f"output item {index} started twice")
        self._calls[index] = len(self._ids.assigned)
        call_id = self._ids.next(item.get("call_id"))
        arguments = item.get("arguments")
        arguments = arguments if isinstance(arguments, str) else ""
        self._shown_arguments[index] = arguments
        yield ToolCallDelta(self._calls[index], call_id, name, arguments)

    def _arguments(self, index: int, piece: Any) -> Iterator[Delta]:
        piece = _text(piece, "delta")
        if index in self._calls and piece:
            self._shown_arguments[index] += piece
            yield ToolCallDelta(self._calls[index], arguments=piece)

    def _finish_item(self, index: int, item: Mapping[str, Any]) -> Iterator[Delta]:
        self._done_items[index] = copy.deepcopy(dict(item))
        if index in self._calls and not self._shown_arguments[index]:
            # No argument pieces came: show the item's arguments, so the joined
            # pieces are what the response stores.
            arguments = item.get("arguments")
            if isinstance(arguments, str) and arguments:
                self._shown_arguments[index] = arguments
                yield ToolCallDelta(self._calls[index], arguments=arguments)

    def _summary(self, record: Mapping[str, Any]) -> Iterator[Delta]:
        text = _text(record["delta"], "delta")
        if not text:
            return
        part = (str(record.get("item_id", "")), _index(record.get("summary_index", 0)))
        if part != self._summary_part and self._reasoning_shown:
            # A new summary part: the whole answer joins parts with a blank line.
            text = SUMMARY_SEPARATOR + text
        self._summary_part = part
        self._reasoning_shown = True
        yield ReasoningDelta(text)
