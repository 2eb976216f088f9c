"""Google Gemini ``generateContent`` (REST v1beta): history in, one candidate out.

The history arrives as ``ChatMessage`` objects and is read through
:meth:`ChatMessage.to_dict` (the one place the OpenAI wire shape is made); only
``provider_metadata``, which is not part of that shape, is read from the
message itself. What changes on the way to Gemini, and why (each rule is an
HTTP 400 otherwise, per the generateContent reference and its error messages):

- System messages are joined, in order, into ``systemInstruction``.
- The assistant role is ``model``; a turn with calls is one ``model`` content:
  a text part when there is text, then one ``functionCall`` per call with
  ``args`` as an object (``{}`` when empty or when the stored arguments are not
  an object).
- Each run of tool messages becomes ONE ``user`` content of ``functionResponse``
  parts in call order, each named after the call it answers; a result that is
  a JSON object is the ``response`` as is, anything else is ``{"output": text}``,
  and a result flagged ``is_error`` is ``{"error": text}``.
  That content holds only the responses (their count must equal the calls');
  a user text after it is a content of its own.
- Every call must be answered by the next turn and every result must answer a
  call of the model turn right before it, else :class:`InvalidArgumentError`.
- Blank text is never sent, and a message left with no part is skipped.
- Gemini's own call id and ``thoughtSignature`` are kept at parse time in
  ``provider_metadata`` as ``{"gemini": {"calls": {call_id: {"id": ...,
  "thought_signature": ...}}}}`` (only the keys Gemini sent) and replayed
  exactly; a call that did not come from Gemini is sent without either, so a
  synthesised id never reaches Gemini.
- Tool schemas are rewritten into the OpenAPI subset Gemini accepts (see
  :mod:`.gemini_schema`).
- A tool name Gemini refuses (not starting with a letter or ``_``) goes by a
  stable alias everywhere on the wire (:func:`gemini_function_name`); calls
  in a response are mapped back to the real name.

The model id goes into the URL path, so it is validated first; the key travels
only in the ``x-goog-api-key`` header, never in the URL. A streamed answer
(``:streamGenerateContent?alt=sse``) is merged back into one body by
:class:`~conversations.providers.gemini_stream.GeminiStreamParser`.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, assert_never

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    Role,
    ToolCall,
    ToolSpec,
    Usage,
)
from conversations.domain.messages import decode_arguments
from conversations.exceptions import ProviderResponseError

from . import gemini_grounding as grounding
from .base import (
    CompletionOptions,
    HTTPProvider,
    arguments_object,
    assign_call_ids,
    join_system_messages,
    token_count,
)
from .gemini_stream import GeminiStreamParser
from .gemini_tools import (
    check_function_names,
    gemini_function_declarations,
    gemini_function_name,
    gemini_tool_config,
    native_call_metadata,
)
from .pairing import OwedResults
from .parts import gemini_parts
from .structured import gemini_output

__all__ = [
    "METADATA_KEY",
    "GeminiProvider",
    "gemini_contents",
    "gemini_function_declarations",
    "gemini_function_name",
    "gemini_model_path",
    "gemini_tool_config",
    "gemini_usage",
]

logger = logging.getLogger("conversations.providers")

METADATA_KEY: Final = "gemini"
"""This adapter's namespace inside ``provider_metadata``."""

_MODEL_ID: Final = re.compile(r"[A-Za-z0-9._-]+")
_CONTENT_FILTER: Final = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
# Gemini rejected the call it tried to make; there is nothing to execute.
_FAILED_CALL: Final = frozenset(
    {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"}
)

Part = dict[str, Any]
_UNANSWERED: Final = "Gemini needs one response per call"


# Model id ------------------------------------------------------------------------


def gemini_model_path(model: str) -> str:
    """The model id as it goes into the URL path; ``models/`` may prefix it.

    Raises :class:`InvalidArgumentError` (``invalid_model``) for anything but
    letters, digits, ``.``, ``_`` and ``-``: a ``/``, ``?`` or ``#`` would
    change which URL is called.
    """
    bare = model.removeprefix("models/")
    if not _MODEL_ID.fullmatch(bare):
        raise InvalidArgumentError(
            f"invalid Gemini model id {model!r}: use letters, digits, '.', '_', '-'",
            code="invalid_model",
            field="model",
        )
    return bare


# Request mapping (pure) ---------------------------------------------------------


def _is_blank(text: str) -> bool:
    return not text.strip()


def _native_calls(metadata: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``{call_id: {"id"?, "thought_signature"?}}`` kept when Gemini made the turn."""
    ours = (metadata or {}).get(METADATA_KEY)
    calls = ours.get("calls") if isinstance(ours, Mapping) else None
    return calls if isinstance(calls, Mapping) else {}


def _native_value(info: Any, key: str) -> str | None:
    value = info.get(key) if isinstance(info, Mapping) else None
    return value if isinstance(value, str) and value else None


class _Call:
    """What a result needs from its call: the wire name and Gemini's id if any."""

    __slots__ = ("name", "native_id")

    def __init__(self, name: str, native_id: str | None) -> None:
        self.name = name
        self.native_id = native_id


def _model_parts(message: ChatMessage) -> tuple[list[Part], dict[str, _Call]]:
    """Parts of one assistant message, and its calls by id (for pairing the results)."""
    wire = message.to_dict()
    parts: list[Part] = [] if _is_blank(wire["content"]) else [{"text": wire["content"]}]
    # Code that ran goes back with its result and the text around it, as received.
    parts = grounding.stored_parts((message.provider_metadata or {}).get(METADATA_KEY)) or parts
    native = _native_calls(message.provider_metadata)
    calls: dict[str, _Call] = {}
    for raw in wire.get("tool_calls") or []:
        # Back through ToolCall so arguments_object applies the one rule for
        # raw (non-object) arguments: they become {} on object wires.
        call = ToolCall.from_dict(raw)
        info = native.get(call.id)
        native_id = _native_value(info, "id")
        name = gemini_function_name(call.name)
        function: dict[str, Any] = {"name": name, "args": arguments_object(call)}
        if native_id is not None:
            function = {"id": native_id, **function}
        part: Part = {"functionCall": function}
        signature = _native_value(info, "thought_signature")
        if signature is not None:
            part["thoughtSignature"] = signature
        parts.append(part)
        calls[call.id] = _Call(name, native_id)
    return parts, calls


def _response_object(text: str, *, is_error: bool) -> dict[str, Any]:
    # Gemini wants an object: "error" marks a failure, "output" is its
    # documented key for plain output, and a JSON object result goes as is.
    if is_error:
        return {"error": text}
    decoded = decode_arguments(text)
    return decoded if decoded is not None else {"output": text}


def _response_part(call: _Call, message: ChatMessage) -> Part:
    response: dict[str, Any] = {
        "name": call.name,
        "response": _response_object(message.content, is_error=message.is_error),
    }
    if call.native_id is not None:
        response = {"id": call.native_id, **response}
    return {"functionResponse": response}


# (role, parts, holds function responses)
_Content = tuple[str, list[Part], bool]


def _append(contents: list[_Content], role: str, parts: list[Part], *, responses: bool) -> None:
    # Same-role turns merge (a model text then its calls form ONE call turn),
    # but a responses content stays apart: its parts must match the calls.
    if contents and not responses and contents[-1][0] == role and not contents[-1][2]:
        contents[-1][1].extend(parts)
    else:
        contents.append((role, parts, responses))


def gemini_contents(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The ``contents`` array (system messages excluded: they go to ``systemInstruction``).

    Raises :class:`InvalidArgumentError` (``field`` is the message index) for a
    tool message without a call id, one answering a call that is not in the
    model turn right before it, a call answered twice, a call left unanswered,
    calls with no user turn before them, or a history with nothing to send.
    """
    contents: list[_Content] = []
    owed: OwedResults[Part] = OwedResults()
    owed_files: list[Part] = []  # the results' files: inlineData after the functionResponses
    calls: dict[str, _Call] = {}  # the calls of the last model turn, by id
    for index, message in enumerate(messages):
        turn_calls: dict[str, _Call] = {}
        match message.role:
            case Role.SYSTEM:
                continue  # lifted into systemInstruction
            case Role.TOOL:
                call_id = owed.answered_call(message, index)
                owed.add(call_id, _response_part(calls[call_id], message))
                owed_files.extend(gemini_parts(message.parts))
                continue
            case Role.USER:
                role = "user"
                parts: list[Part] = gemini_parts(message.parts, text=message.content)
            case Role.ASSISTANT:
                role = "model"
                parts, turn_calls = _model_parts(message)
            case _:  # pragma: no cover - Role is a closed enum
                assert_never(message.role)
        if not parts:
            continue  # blank text: nothing to send, nothing lost
        if owed.owed:
            _append(contents, "user", owed.close() + owed_files, responses=True)
            owed, owed_files = OwedResults(), []
        _append(contents, role, parts, responses=False)
        if turn_calls:
            if len(contents) == 1:
                raise InvalidArgumentError(
                    "Gemini needs a user turn before the first tool call",
                    code="invalid_turn_order",
                    field=f"{index}/tool_calls",
                )
            calls = turn_calls
            owed = OwedResults(index=index, call_ids=list(turn_calls), refusal=_UNANSWERED)
    if owed.owed:
        _append(contents, "user", owed.close() + owed_files, responses=True)
    if not contents:
        raise InvalidArgumentError(
            "the conversation has no user or assistant text to send",
            code="no_messages",
            field="messages",
        )
    return [{"role": role, "parts": parts} for role, parts, _ in contents]


def _merge_extra(payload: dict[str, Any], extra: Mapping[str, Any]) -> None:
    # Deep, because Gemini nests its options (generationConfig.thinkingConfig):
    # extra={"generationConfig": {"topP": 0.9}} must not wipe temperature.
    for key, value in extra.items():
        current = payload.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            _merge_extra(current, value)
        else:
            payload[key] = copy.deepcopy(value)


# Response mapping (pure) --------------------------------------------------------


def _count(data: Mapping[str, Any], name: str) -> int:
    return token_count(data.get(name), f"usage {name}", provider="gemini")


def gemini_usage(data: Any) -> Usage:
    """:class:`Usage` from ``usageMetadata``; thoughts count as completion (and reasoning)."""
    if data is None:
        return Usage()
    if not isinstance(data, Mapping):
        raise ProviderResponseError(
            f"gemini: usageMetadata is not an object: {type(data).__name__}"
        )
    prompt = _count(data, "promptTokenCount") + _count(data, "toolUsePromptTokenCount")
    thoughts = _count(data, "thoughtsTokenCount")
    completion = _count(data, "candidatesTokenCount") + thoughts
    total = _count(data, "totalTokenCount") if data.get("totalTokenCount") is not None else None
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cached_prompt_tokens=_count(data, "cachedContentTokenCount"),
        reasoning_tokens=thoughts,
    )


def _finish_reason(reason: Any) -> str:
    """``finishReason`` in OpenAI's words, for a candidate without calls."""
    if reason == "MAX_TOKENS":
        return "length"
    if reason in _CONTENT_FILTER:
        return "content_filter"
    if reason in _FAILED_CALL:
        # No clean equivalent: the model tried a call Gemini refused. The turn
        # ends without calls; the warning keeps it visible.
        logger.warning("gemini response: finishReason %s, no tool call made", reason)
    return "stop"


def _candidate_parts(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    candidates = body.get("candidates")
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], Mapping):
        raise ProviderResponseError("gemini: the response has no candidates")
    candidate = candidates[0]
    content = candidate.get("content") or {}
    parts = (content.get("parts") or []) if isinstance(content, Mapping) else None
    if not isinstance(parts, list) or not all(isinstance(part, Mapping) for part in parts):
        raise ProviderResponseError("gemini: the candidate's parts are not a list of objects")
    return candidate, parts


def _blocked(body: Mapping[str, Any]) -> bool:
    feedback = body.get("promptFeedback")
    return isinstance(feedback, Mapping) and bool(feedback.get("blockReason"))


# The adapter ---------------------------------------------------------------------


class GeminiProvider(HTTPProvider):
    """Gemini's ``generateContent`` (``POST {base_url}/models/{model}:generateContent``)."""

    provider_name = "gemini"
    provider_tool_kinds = frozenset({"web_search", "code_execution"})
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"

    def build_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """The generateContent body (pure); ``options.extra`` is deep-merged last."""
        payload: dict[str, Any] = {}
        # Blank system text is refused too ("must contain non-whitespace text").
        system = join_system_messages(m for m in messages if not _is_blank(m.content))
        if system:
            payload["systemInstruction"] = {"parts": [{"text": system}]}
        check_function_names(messages, tools)
        payload["contents"] = gemini_contents(messages)
        offered = [{"functionDeclarations": gemini_function_declarations(tools)}] if tools else []
        offered += grounding.gemini_provider_tools(options.provider_tools)
        if offered:
            payload["tools"] = offered
        if tools:
            config = gemini_tool_config(options, tools)
            if config is not None:
                payload["toolConfig"] = config
        generation: dict[str, Any] = {}
        if options.temperature is not None and self.sends("temperature", options):
            generation["temperature"] = options.temperature
        if options.max_tokens is not None:
            generation["maxOutputTokens"] = options.max_tokens
        if options.stop:
            generation["stopSequences"] = list(options.stop)
        if options.output_schema is not None:
            generation.update(gemini_output(options.output_schema, tools_offered=bool(tools)))
        if generation:
            payload["generationConfig"] = generation
        _merge_extra(payload, options.extra)
        return payload

    def parse_response(
        self,
        body: Mapping[str, Any],
        *,
        known_ids: Collection[str] = (),
        tools: Sequence[ToolSpec] = (),
    ) -> CompletionResponse:
        """The first candidate (pure): text, thoughts, calls, finish reason, usage.

        Gemini's call id is kept when it sent one that is not in use yet (else a
        fresh id); its id and ``thoughtSignature`` go into ``provider_metadata``
        for replay. ``finish_reason`` is ``tool_calls`` whenever calls are
        present (Gemini itself says ``STOP``); a prompt blocked before any
        candidate is ``content_filter`` with empty content.
        """
        model = body.get("modelVersion")
        model = model if isinstance(model, str) else ""
        usage = gemini_usage(body.get("usageMetadata"))
        if not body.get("candidates") and _blocked(body):
            return CompletionResponse(
                content="",
                model=model,
                usage=usage,
                finish_reason="content_filter",
                provider=self.provider_name,
            )
        candidate, parts = _candidate_parts(body)
        real_names = {gemini_function_name(spec.name): spec.name for spec in tools}
        texts: list[str] = []
        thoughts: list[str] = []
        candidates: list[tuple[str | None, str, Any]] = []
        signatures: list[str | None] = []
        for part in parts:
            function = part.get("functionCall")
            text = part.get("text")
            if function is not None:
                function = function if isinstance(function, Mapping) else {}
                native_id, name = function.get("id"), function.get("name")
                candidates.append(
                    (
                        native_id if isinstance(native_id, str) and native_id else None,
                        real_names.get(name, name) if isinstance(name, str) else "",
                        function.get("args"),
                    )
                )
                signature = part.get("thoughtSignature")
                signatures.append(signature if isinstance(signature, str) and signature else None)
            elif isinstance(text, str):
                (thoughts if part.get("thought") is True else texts).append(text)
            elif not grounding.CODE_PART_KEYS & set(part):
                # Inline data and parts added later: nothing of ours reads them.
                logger.warning("gemini response: ignored a part with keys %s", sorted(part))
        calls = assign_call_ids(candidates, known_ids=known_ids, provider=self.provider_name)
        native = native_call_metadata(calls, candidates, signatures)
        thinking = "".join(thoughts)
        namespace: dict[str, Any] = {"calls": native} if native else {}
        if (kept := grounding.replayed_parts(parts)) is not None:
            namespace["parts"] = kept
        content = "".join(texts)
        return CompletionResponse(
            content=content,
            model=model,
            usage=usage,
            finish_reason="tool_calls" if calls else _finish_reason(candidate.get("finishReason")),
            provider=self.provider_name,
            tool_calls=calls,
            thinking=thinking or None,
            provider_metadata={METADATA_KEY: namespace} if namespace else {},
            provider_tool_calls=tuple(grounding.gemini_activity(candidate, parts)),
            citations=tuple(grounding.gemini_citations(candidate, content)),
        )

    def build_stream_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """The same body as :meth:`build_payload`: the URL asks for the stream."""
        return self.build_payload(messages, tools, options)

    def stream_parser(
        self, *, known_ids: Collection[str] = (), tools: Sequence[ToolSpec] = ()
    ) -> GeminiStreamParser:
        """A parser for one streamed answer; its response is :meth:`parse_response`'s."""
        return GeminiStreamParser(
            functools.partial(self.parse_response, known_ids=known_ids, tools=tools),
            known_ids=known_ids,
            real_names={gemini_function_name(spec.name): spec.name for spec in tools},
            redact=self._redact,
            metadata_key=METADATA_KEY,
        )

    def _url(self, options: CompletionOptions) -> str:
        return f"{self.base_url}/models/{gemini_model_path(options.model)}:generateContent"

    def _stream_url(self, options: CompletionOptions) -> str:
        model = gemini_model_path(options.model)
        return f"{self.base_url}/models/{model}:streamGenerateContent?alt=sse"

    def _auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key or ""}
