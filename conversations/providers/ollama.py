"""Ollama's native ``POST /api/chat`` (not its OpenAI-compatible ``/v1``).

The native API differs from OpenAI's where it matters for tool turns: call
arguments are JSON *objects* (a string there does not decode), a tool result
carries the tool's name (``tool_name``, looked up from the call it answers),
sampling options live under ``options``, there is no ``tool_choice`` and
``stream`` defaults to true. Ollama's replies say ``done_reason: "stop"`` even
when they call tools, and older builds send calls without ids.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal, assert_never

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    Role,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from conversations.exceptions import ProviderResponseError

from .base import (
    CompletionOptions,
    HTTPProvider,
    arguments_object,
    assign_call_ids,
    token_count,
)
from .conversion import require_offered_tool
from .openai import call_candidates
from .openai_stream import ReasoningText, RebuildingParser, stream_error
from .parts import ollama_images
from .streaming import Delta
from .structured import ollama_format

__all__ = [
    "OllamaProvider",
    "OllamaStreamParser",
    "ollama_messages",
    "ollama_options",
    "ollama_tools",
    "ollama_usage",
]


# Request mapping (pure) ---------------------------------------------------------


def ollama_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The ``messages`` array: system messages stay messages, arguments become objects.

    Raises :class:`InvalidArgumentError` for a tool message that answers no
    earlier call: Ollama needs the tool's name, and only the call knows it.
    """
    names: dict[str, str] = {}  # call id -> tool name, from the calls seen so far
    result: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        wire = replace(message, parts=()).to_dict()
        if message.parts:
            # Ollama takes images (base64) beside the text, a tool result's too.
            wire["images"] = ollama_images(message.parts)
        match message.role:
            case Role.SYSTEM | Role.USER:
                pass
            case Role.ASSISTANT:
                if message.tool_calls is not None:
                    wire["tool_calls"] = [
                        _ollama_call(call, position)
                        for position, call in enumerate(message.tool_calls)
                    ]
                    names.update((call.id, call.name) for call in message.tool_calls)
            case Role.TOOL:
                # Both keys: tool_name is what the docs ask for, tool_call_id
                # is accepted and lets newer servers pair the result exactly.
                wire["tool_name"] = _answered_tool_name(message, index, names)
            case _:  # pragma: no cover - Role is a closed enum
                assert_never(message.role)
        result.append(wire)
    return result


def _ollama_call(call: ToolCall, position: int) -> dict[str, Any]:
    # Raw (non-object) argument text cannot travel as an object: it goes as {}.
    return {
        "id": call.id,
        "function": {"index": position, "name": call.name, "arguments": arguments_object(call)},
    }


def _answered_tool_name(message: ChatMessage, index: int, names: Mapping[str, str]) -> str:
    if message.tool_call_id is None:
        raise InvalidArgumentError(
            "a tool message needs the id of the call it answers",
            code="missing_tool_call_id",
            field=f"{index}/tool_call_id",
        )
    name = names.get(message.tool_call_id)
    if name is None:
        raise InvalidArgumentError(
            f"tool message answers {message.tool_call_id!r}, which no earlier call has",
            code="unknown_tool_call_id",
            field=f"{index}/tool_call_id",
        )
    return name


def ollama_tools(tools: Sequence[ToolSpec], tool_choice: str | None) -> list[dict[str, Any]]:
    """The ``tools`` array, with ``tool_choice`` emulated since Ollama has none.

    ``"none"`` offers nothing (the model cannot call what it is not shown); a
    tool name offers only that tool; ``"auto"`` and ``"required"`` offer all
    (``required`` cannot be enforced).
    """
    if tool_choice == "none":
        return []
    if tool_choice is None or tool_choice in ("auto", "required"):
        return [spec.to_dict() for spec in tools]
    require_offered_tool(tool_choice, tools)
    return [spec.to_dict() for spec in tools if spec.name == tool_choice]


def ollama_options(options: CompletionOptions) -> dict[str, Any]:
    """Sampling settings in Ollama's ``options`` object (empty when all are defaults)."""
    sampling: dict[str, Any] = {}
    if options.temperature is not None and OllamaProvider.sends("temperature", options):
        sampling["temperature"] = options.temperature
    if options.max_tokens is not None:
        sampling["num_predict"] = options.max_tokens
    if options.stop:
        sampling["stop"] = list(options.stop)
    return sampling


# Response mapping (pure) --------------------------------------------------------


def ollama_usage(body: Mapping[str, Any]) -> Usage:
    """Usage as Ollama's own OpenAI layer reports it: total = prompt + completion."""
    return Usage(
        # Both counters are omitempty: a fully cached prompt omits prompt_eval_count.
        prompt_tokens=token_count(body.get("prompt_eval_count"), "prompt_eval_count"),
        completion_tokens=token_count(body.get("eval_count"), "eval_count"),
    )


def _finish_reason(done_reason: Any, has_calls: bool) -> str:
    # Ollama says "stop" for a turn that calls tools; the loop needs "tool_calls".
    if has_calls:
        return "tool_calls"
    if not isinstance(done_reason, str) or not done_reason:
        return "stop"
    return done_reason  # "stop" and "length" already mean what OpenAI's do


class OllamaStreamParser(RebuildingParser):
    """One streamed ``/api/chat`` answer: NDJSON lines, the last with ``done: true``.

    Each line's ``message`` holds the next piece of ``content`` and
    ``thinking`` and whole ``tool_calls`` (arguments as objects); the final
    line adds ``done_reason`` and the token counts. At the end the pieces are
    put together into the body a non-streamed request gets and parsed by
    ``parse_response``.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._thinking = ReasoningText()
        self._calls: list[dict[str, Any]] = []
        self._final: Mapping[str, Any] | None = None
        self._model: Any = None

    def progress(self) -> object:
        """Whether the done line (the finish and the counts) has come."""
        return self._final is not None

    def feed(self, event: str, data: str) -> Iterable[Delta]:
        if self._final is not None:
            return ()
        line = json.loads(data)
        if not isinstance(line, Mapping):
            raise ProviderResponseError(
                f"ollama: a stream line is not an object: {type(line).__name__}"
            )
        if line.get("error"):
            raise stream_error("ollama", line["error"], self._redact)
        self._model = line.get("model", self._model)
        message = line.get("message") or {}
        if not isinstance(message, Mapping):
            raise TypeError("message is not an object")
        deltas: list[Delta] = []
        thinking = message.get("thinking")
        if isinstance(thinking, str) and thinking:
            deltas += self._thinking.add(thinking)
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise TypeError("message content is not text")
        if content:
            self._content.append(content)
            deltas.append(TextDelta(content))
        for candidate in call_candidates(message.get("tool_calls")):
            deltas += self._call(*candidate)
        if line.get("done") is True:
            self._final = line
        return deltas

    def _call(self, vendor_id: str | None, name: str, arguments: Any) -> list[Delta]:
        if not name:
            self._calls.append({"id": vendor_id, "function": {"name": name}})
            return []  # dropped by the parse, so never shown
        position, call_id = self._slots.claim(vendor_id)
        made = assign_call_ids([(call_id, name, arguments)], provider="ollama")
        assert made is not None  # a named call is never dropped
        self._calls.append({"id": call_id, "function": {"name": name, "arguments": arguments}})
        return [ToolCallDelta(position, call_id, name, made[0].arguments_json)]

    def finish(self) -> CompletionResponse:
        if self._final is None:
            raise ProviderResponseError(
                "ollama: the stream ended without its done line; the answer is incomplete"
            )
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content)}
        if self._thinking.parts:
            message["thinking"] = self._thinking.text
        # Named calls first, in the order of their slots; unnamed ones are dropped anyway.
        named = [call for call in self._calls if call["function"]["name"]]
        unnamed = [call for call in self._calls if not call["function"]["name"]]
        if self._calls:
            message["tool_calls"] = named + unnamed
        body = {
            **{key: value for key, value in self._final.items() if key != "message"},
            "model": self._model,
            "message": message,
        }
        return self._parsed(body)


# The adapter ---------------------------------------------------------------------


class OllamaProvider(HTTPProvider):
    """A local or remote Ollama server; a key, if given, is sent for auth proxies."""

    provider_name = "ollama"
    default_base_url = "http://localhost:11434"
    requires_api_key = False

    def build_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """The ``/api/chat`` body (pure); never ``tool_choice`` nor a parallel switch."""
        payload: dict[str, Any] = {
            "model": options.model,
            "messages": ollama_messages(messages),
            "stream": False,
        }
        offered = ollama_tools(tools, options.tool_choice) if tools else []
        if offered:
            payload["tools"] = offered
        sampling = ollama_options(options)
        if sampling:
            payload["options"] = sampling
        if options.output_schema is not None:
            payload["format"] = ollama_format(options.output_schema)
        for key, value in options.extra.items():
            # extra={"options": {"num_ctx": 8192}} adds to the sampling settings
            # instead of silently replacing them.
            if key == "options" and isinstance(value, Mapping):
                payload["options"] = {**payload.get("options", {}), **value}
            else:
                payload[key] = value
        return payload

    def parse_response(
        self,
        body: Mapping[str, Any],
        *,
        known_ids: Collection[str] = (),
        tools: Sequence[ToolSpec] = (),
    ) -> CompletionResponse:
        """The ``message`` of a non-streamed ``/api/chat`` answer (pure).

        Missing or reused call ids (``known_ids`` included) get fresh ones that
        are unique in the conversation, never positional ``call_0``.
        """
        try:
            return self._parse(body, known_ids)
        except ProviderResponseError as exc:
            raise ProviderResponseError(f"{self.provider_name}: {exc.detail}") from None

    def _parse(self, body: Mapping[str, Any], known_ids: Collection[str]) -> CompletionResponse:
        message = body.get("message")
        if not isinstance(message, Mapping):
            error = body.get("error")
            detail = f": {self._redact(str(error))}" if error else ""
            raise ProviderResponseError(f"the response has no message{detail}")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise ProviderResponseError(f"message content is not text: {type(content).__name__}")
        calls = assign_call_ids(
            call_candidates(message.get("tool_calls")),
            known_ids=known_ids,
            provider=self.provider_name,
        )
        thinking = message.get("thinking")
        model = body.get("model")
        return CompletionResponse(
            content=content or "",
            model=model if isinstance(model, str) else "",
            usage=ollama_usage(body),
            finish_reason=_finish_reason(body.get("done_reason"), calls is not None),
            provider=self.provider_name,
            tool_calls=calls,
            thinking=thinking if isinstance(thinking, str) and thinking.strip() else None,
        )

    stream_format: ClassVar[Literal["sse", "ndjson"]] = "ndjson"

    def stream_parser(
        self, *, known_ids: Collection[str] = (), tools: Sequence[ToolSpec] = ()
    ) -> OllamaStreamParser:
        """A parser for one streamed answer (:class:`OllamaStreamParser`)."""
        return OllamaStreamParser(
            parse=self.parse_response, redact=self._redact, known_ids=known_ids, tools=tools
        )

    def _url(self, options: CompletionOptions) -> str:
        return f"{self.base_url}/api/chat"

    def _auth_headers(self) -> dict[str, str]:
        if self._api_key is None:
            return {}
        return {"authorization": f"Bearer {self._api_key}"}
