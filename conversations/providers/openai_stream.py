"""Streamed Chat Completions: Server-Sent Events of ``chat.completion.chunk`` objects.

Each ``data:`` record is a chunk whose first choice carries a ``delta`` (text
in ``content``, reasoning in ``reasoning_content`` or ``reasoning``, calls in
``tool_calls`` pieces keyed by ``index``, whose first piece has the id and
name); the last choice chunk carries ``finish_reason``, an optional chunk
after it the ``usage`` (with ``choices: []``), and ``data: [DONE]`` ends the
stream. :class:`OpenAIStreamParser` shows the pieces as they come and, at the
end, rebuilds the body the service would have sent whole and hands it to the
adapter's ``parse_response``, so a streamed answer equals the same answer
sent whole.

:class:`CallSlots` and :class:`ReasoningText` keep the deltas in step with
that final parse; the Ollama stream uses them too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conversations.domain import CompletionResponse, ReasoningDelta, TextDelta, ToolCallDelta
from conversations.exceptions import ProviderResponseError

from .conversion import fresh_call_id
from .streaming import Delta

__all__ = ["CallSlots", "OpenAIStreamParser", "ReasoningText", "RebuildingParser", "stream_error"]

Parse = Callable[..., CompletionResponse]

# Reasoning keys in the order parse_response prefers them.
_REASONING_KEYS = ("reasoning_content", "reasoning")


class CallSlots:
    """Positions and ids of a streamed turn's calls, as ``assign_call_ids`` will keep them.

    A call gets its slot once it has a name (a call without one is dropped by
    the parse, so it must not take a position): the next position, and the
    service's id unless that is missing or already used in the conversation
    or the turn, in which case a fresh one. The rebuilt body carries these
    ids, so the final parse keeps them and the deltas name the same calls.
    """

    def __init__(self, known_ids: Collection[str]) -> None:
        self._used = set(known_ids)
        self.count = 0

    def claim(self, vendor_id: Any) -> tuple[int, str]:
        """The position and id of the next named call."""
        usable = isinstance(vendor_id, str) and vendor_id and vendor_id not in self._used
        call_id = vendor_id if usable else fresh_call_id()
        self._used.add(call_id)
        position = self.count
        self.count += 1
        return position, call_id


@dataclass
class ReasoningText:
    """Reasoning pieces, shown only once they are not blank (a blank one is not kept)."""

    parts: list[str] = field(default_factory=list)
    shown: bool = False

    def add(self, text: str) -> list[Delta]:
        self.parts.append(text)
        if self.shown:
            return [ReasoningDelta(text)] if text else []
        joined = "".join(self.parts)
        if not joined.strip():
            return []
        self.shown = True
        return [ReasoningDelta(joined)]

    @property
    def text(self) -> str:
        return "".join(self.parts)


def stream_error(provider: str, error: Any, redact: Callable[[str], str]) -> ProviderResponseError:
    """The error for an ``error`` record inside a stream."""
    detail = error.get("message", error) if isinstance(error, Mapping) else error
    return ProviderResponseError(f"{provider}: the stream reported an error: {redact(str(detail))}")


class RebuildingParser:
    """What the adapters' stream parsers share: the body they rebuild is parsed as a whole one.

    ``parse`` is the adapter's ``parse_response``; ``known_ids`` and ``tools``
    are handed to it as they would be for a whole answer.
    """

    def __init__(
        self,
        *,
        parse: Parse,
        redact: Callable[[str], str],
        known_ids: Collection[str] = (),
        tools: Sequence[Any] = (),
    ) -> None:
        self._parse = parse
        self._redact = redact
        self._known_ids = known_ids
        self._tools = tools
        self._slots = CallSlots(known_ids)
        self._content: list[str] = []

    def _parsed(self, body: Mapping[str, Any]) -> CompletionResponse:
        return self._parse(body, known_ids=self._known_ids, tools=self._tools)


@dataclass
class _Call:
    vendor_id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    position: int | None = None
    call_id: str | None = None


class OpenAIStreamParser(RebuildingParser):
    """One streamed Chat Completions answer; see the module docstring."""

    def __init__(
        self,
        *,
        provider: str,
        parse: Parse,
        redact: Callable[[str], str],
        known_ids: Collection[str] = (),
        tools: Sequence[Any] = (),
    ) -> None:
        super().__init__(parse=parse, redact=redact, known_ids=known_ids, tools=tools)
        self._provider = provider
        self._refusal: list[str] = []
        self._reasoning = {key: ReasoningText() for key in _REASONING_KEYS}
        self._reasoning_key: str | None = None
        self._calls: dict[int, _Call] = {}
        self._finish_reason: str | None = None
        self._model: str | None = None
        self._usage: Any = None
        self._done = False

    def progress(self) -> object:
        """What has been said of the end (finish reason, usage, ``[DONE]``): changes count as news."""
        return (self._finish_reason, self._usage, self._done)

    def feed(self, event: str, data: str) -> Iterable[Delta]:
        if self._done:
            return ()
        if data.strip() == "[DONE]":
            self._done = True
            return ()
        chunk = json.loads(data)
        if not isinstance(chunk, Mapping):
            raise ProviderResponseError(
                f"{self._provider}: a stream chunk is not an object: {type(chunk).__name__}"
            )
        if chunk.get("error"):
            raise stream_error(self._provider, chunk["error"], self._redact)
        model = chunk.get("model")
        if isinstance(model, str) and model:
            self._model = model
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise TypeError("choices is not a list")
        deltas: list[Delta] = []
        for choice in choices:
            if choice.get("index", 0) != 0:
                continue  # only the first choice is answered, as parse_response does
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self._finish_reason = reason
            delta = choice.get("delta") or {}
            if not isinstance(delta, Mapping):
                raise TypeError("delta is not an object")
            deltas += self._delta(delta)
        return deltas

    def _delta(self, delta: Mapping[str, Any]) -> list[Delta]:
        deltas: list[Delta] = []
        for key in _REASONING_KEYS:
            value = delta.get(key)
            if isinstance(value, str) and value:
                pieces = self._reasoning[key].add(value)
                # One key is shown: a service sending both sends the same text twice.
                if self._reasoning_key is None and pieces:
                    self._reasoning_key = key
                if self._reasoning_key == key:
                    deltas += pieces
        text = _delta_text(delta.get("content"))
        if text:
            self._content.append(text)
            deltas.append(TextDelta(text))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            # The answer's text when there is no content (parse_response's rule).
            self._refusal.append(refusal)
            if not self._content:
                deltas.append(TextDelta(refusal))
        for piece in delta.get("tool_calls") or ():
            deltas += self._call_piece(piece)
        return deltas

    def _call_piece(self, piece: Any) -> list[Delta]:
        if not isinstance(piece, Mapping):
            raise TypeError("a tool call piece is not an object")
        index = piece.get("index")
        vendor_id = piece.get("id")
        if index is None:
            # Some compatible servers leave index out: a new id starts a new call.
            last = max(self._calls, default=None)
            new_id = isinstance(vendor_id, str) and vendor_id
            if last is None or (new_id and self._calls[last].vendor_id not in (None, vendor_id)):
                index = 0 if last is None else last + 1
            else:
                index = last
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError("a tool call index is not an integer")
        call = self._calls.setdefault(index, _Call())
        if call.vendor_id is None and isinstance(vendor_id, str) and vendor_id:
            call.vendor_id = vendor_id
        function = piece.get("function") or {}
        if not isinstance(function, Mapping):
            raise TypeError("a tool call's function is not an object")
        name = function.get("name")
        if not call.name and isinstance(name, str):
            call.name = name
        fragment = function.get("arguments")
        if fragment is not None and not isinstance(fragment, str):
            raise TypeError("a tool call's arguments piece is not text")
        if fragment:
            call.arguments.append(fragment)
        if call.position is None:
            if not call.name:
                return []  # shown once named: a call without a name is dropped
            call.position, call.call_id = self._slots.claim(call.vendor_id)
            return [ToolCallDelta(call.position, call.call_id, call.name, "".join(call.arguments))]
        return [ToolCallDelta(call.position, None, None, fragment)] if fragment else []

    def finish(self) -> CompletionResponse:
        if not self._done or self._finish_reason is None:
            missing = "[DONE]" if self._finish_reason is not None else "a finish_reason"
            raise ProviderResponseError(
                f"{self._provider}: the stream ended without {missing}; the answer is incomplete"
            )
        return self._parsed(self.body())

    def body(self) -> dict[str, Any]:
        """The Chat Completions body the service would have sent whole."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self._content) if self._content else None,
        }
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        for key, reasoning in self._reasoning.items():
            if reasoning.parts:
                message[key] = reasoning.text
        # Named calls in the order of their slots, then those never named (dropped).
        calls = sorted(
            self._calls.values(),
            key=lambda c: (c.position is None, c.position or 0),
        )
        if calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id or call.vendor_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for call in calls
            ]
        body: dict[str, Any] = {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish_reason}],
            "usage": self._usage,
        }
        if self._model is not None:
            body["model"] = self._model
        return body


def _delta_text(content: Any) -> str:
    """A delta's text: a string, or text and refusal parts joined as parse_response joins them."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part[kind]
            for part in content
            if isinstance(part, Mapping)
            for kind in ("text", "refusal")
            if part.get("type") == kind and isinstance(part.get(kind), str)
        )
    raise TypeError(f"delta content is neither text nor parts: {type(content).__name__}")
