"""Gemini's streamed answer (``streamGenerateContent?alt=sse``), folded back into one response.

Each Server-Sent Event carries a whole ``GenerateContentResponse`` holding the
next parts of the first candidate: text, thought text (``"thought": true``)
and function calls, which arrive complete with their ``args`` object and any
``thoughtSignature``. ``usageMetadata`` and ``modelVersion`` are repeated as
the answer grows (the last counts are the totals), and the last chunk names
the ``finishReason``; a prompt refused outright ends with ``promptFeedback``
and no candidate. A failure after the 200 status arrives as an ``error``
object (see :mod:`.stream_support`).

:class:`GeminiStreamParser` shows the text, the thoughts and each call as they
arrive and merges the chunks into the body the whole call would have
returned: the parts in order, adjacent texts of the same kind joined, each
call as sent (its own id and signature, which ``parse_response`` keeps for
replay), the last finish reason and usage. The response is that body through
the adapter's ``parse_response``; only a call id Gemini did not supply is
the one shown in the call's delta instead of another fresh one, so the id the
caller saw is the id stored.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from conversations.domain import CompletionResponse, ReasoningDelta, TextDelta, ToolCallDelta
from conversations.exceptions import ProviderResponseError

from .conversion import assign_call_ids
from .stream_support import StreamCallIds, stream_error
from .streaming import Delta

__all__ = ["GeminiStreamParser"]

Part = dict[str, Any]
_SIGNATURE = "thoughtSignature"


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} is not an object")
    return value


def _is_text(part: Mapping[str, Any]) -> bool:
    return part.get("functionCall") is None and isinstance(part.get("text"), str)


def _merge(parts: list[Part], part: Mapping[str, Any]) -> None:
    """Add ``part`` to ``parts``, joining it to the text before it when both are one kind.

    A part carrying only a signature (Gemini may close a streamed text with
    one) joins the text before it too, unless that text has its own.
    """
    last = parts[-1] if parts else None
    signature = part.get(_SIGNATURE)
    if last is not None and _is_text(last) and (last.get(_SIGNATURE) is None or signature is None):
        if _is_text(part) and set(part) <= {"text", "thought", _SIGNATURE}:
            if (part.get("thought") is True) == (last.get("thought") is True):
                last["text"] += part["text"]
                if signature is not None:
                    last[_SIGNATURE] = signature
                return
        elif set(part) == {_SIGNATURE}:
            last[_SIGNATURE] = signature
            return
    parts.append(copy.deepcopy(dict(part)))


class GeminiStreamParser:
    """Folds one streamed ``generateContent`` answer into deltas, then into the parsed response."""

    def __init__(
        self,
        parse: Callable[[Mapping[str, Any]], CompletionResponse],
        *,
        known_ids: Collection[str] = (),
        real_names: Mapping[str, str],
        redact: Callable[[str], str],
        provider: str = "gemini",
        metadata_key: str = "gemini",
    ) -> None:
        self._parse = parse
        self._real_names = dict(real_names)
        self._redact = redact
        self._provider = provider
        self._metadata_key = metadata_key
        self._top: dict[str, Any] = {}  # modelVersion, usageMetadata, promptFeedback, ...
        self._candidate: dict[str, Any] = {}  # finishReason, safetyRatings, ...
        self._role: Any = "model"
        self._parts: list[Part] = []
        self._seen_candidate = False
        self._ids = StreamCallIds(known_ids)
        self._finished = False

    # The protocol -------------------------------------------------------------

    def progress(self) -> object:
        """What has been said of the end (finish, usage): changes count as news."""
        return (self._finished, self._top.get("usageMetadata"), self._candidate.get("finishReason"))

    def feed(self, event: str, data: str) -> Iterator[Delta]:
        """The deltas of one chunk; a malformed one raises ``KeyError``/``TypeError``/``ValueError``."""
        chunk = _mapping(json.loads(data), "a chunk")
        if "error" in chunk:
            raise self._error(chunk["error"])
        for key, value in chunk.items():
            if key != "candidates":
                self._top[key] = copy.deepcopy(value)  # the latest counts are the totals
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, Mapping) and feedback.get("blockReason"):
            self._finished = True  # refused before any candidate: this chunk is the answer
        candidates = chunk.get("candidates")
        if candidates is None:
            return
        if not isinstance(candidates, list):
            raise TypeError("candidates is not a list")
        if not candidates:
            return
        candidate = _mapping(candidates[0], "a candidate")
        self._seen_candidate = True
        for key, value in candidate.items():
            if key != "content":
                self._candidate[key] = copy.deepcopy(value)
        content = _mapping(candidate.get("content") or {}, "content")
        self._role = content.get("role", self._role)
        parts = content.get("parts") or []
        if not isinstance(parts, list):
            raise TypeError("parts is not a list")
        for part in parts:
            yield from self._add(_mapping(part, "a part"))
        if candidate.get("finishReason"):
            self._finished = True

    def finish(self) -> CompletionResponse:
        """The whole answer; :class:`ProviderResponseError` when no chunk named a finishReason."""
        if not self._finished:
            raise ProviderResponseError(
                f"{self._provider}: the stream ended without a finishReason"
            )
        return self._with_shown_ids(self._parse(self.body()))

    def body(self) -> dict[str, Any]:
        """The ``generateContent`` response body the chunks so far amount to."""
        body = copy.deepcopy(self._top)
        if self._seen_candidate:
            candidate = copy.deepcopy(self._candidate)
            candidate["content"] = {"role": self._role, "parts": copy.deepcopy(self._parts)}
            body["candidates"] = [candidate]
        return body

    # Parts --------------------------------------------------------------------

    def _add(self, part: Mapping[str, Any]) -> Iterator[Delta]:
        function = part.get("functionCall")
        text = part.get("text")
        _merge(self._parts, part)
        if function is not None:
            # As parse_response reads it: not an object means no name, and no call.
            function = function if isinstance(function, Mapping) else {}
            name = function.get("name")
            name = self._real_names.get(name, name) if isinstance(name, str) else ""
            if not name:
                return
            index = len(self._ids.assigned)
            call_id = self._ids.next(function.get("id"))
            # The argument text of the call parse_response will build from these args.
            built = assign_call_ids(
                [(call_id, name, function.get("args"))], provider=self._provider
            )
            arguments = built[0].arguments_json if built else ""
            yield ToolCallDelta(index, call_id, name, arguments)
        elif isinstance(text, str) and text:
            yield ReasoningDelta(text) if part.get("thought") is True else TextDelta(text)

    def _with_shown_ids(self, response: CompletionResponse) -> CompletionResponse:
        """``response`` with the ids the deltas showed where ``parse_response`` made fresh ones."""
        calls = response.tool_calls or ()
        renamed = {
            call.id: shown
            for call, shown in zip(calls, self._ids.assigned, strict=True)
            if call.id != shown
        }
        if not renamed:
            return response
        metadata = copy.deepcopy(dict(response.provider_metadata))
        ours = metadata.get(self._metadata_key)
        if isinstance(ours, dict) and isinstance(ours.get("calls"), dict):
            ours["calls"] = {renamed.get(key, key): value for key, value in ours["calls"].items()}
        return dataclasses.replace(
            response,
            tool_calls=tuple(
                dataclasses.replace(call, id=renamed.get(call.id, call.id)) for call in calls
            ),
            provider_metadata=metadata,
        )

    def _error(self, error: Any) -> Exception:
        error = error if isinstance(error, Mapping) else {}
        code, status, message = error.get("code"), error.get("status"), error.get("message")
        return stream_error(
            self._provider,
            code if isinstance(code, int) and not isinstance(code, bool) else None,
            status if isinstance(status, str) and status else "error",
            message if isinstance(message, str) else "",
            redact=self._redact,
        )
