"""Google Gemini ``generateContent`` (REST v1beta): history in, one candidate out.

The history arrives as ``ChatMessage`` objects and is read through
:meth:`ChatMessage.to_dict` (the one place the OpenAI wire shape is made); only
``provider_metadata``, which is not part of that shape, is read from the
message itself. What changes on the way to Gemini, and why (each rule is an
HTTP 400 otherwise, see ``wire-formats.md`` section 3.3):

- System messages are joined, in order, into ``systemInstruction``.
- The assistant role is ``model``; a turn with calls is one ``model`` content:
  a text part when there is text, then one ``functionCall`` per call with
  ``args`` as an object (``{}`` when empty or when the stored arguments are not
  an object).
- Each run of tool messages becomes ONE ``user`` content of ``functionResponse``
  parts in call order, each named after the call it answers; a result that is
  a JSON object is the ``response`` as is, anything else is ``{"output": text}``.
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
  :func:`gemini_parameters`).

The model id goes into the URL path, so it is validated first; the key travels
only in the ``x-goog-api-key`` header, never in the URL.
"""

from __future__ import annotations

import copy
import json
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

from .base import (
    CompletionOptions,
    HTTPProvider,
    arguments_object,
    assign_call_ids,
    join_system_messages,
    token_count,
)

__all__ = [
    "METADATA_KEY",
    "GeminiProvider",
    "SchemaNotExpressible",
    "gemini_contents",
    "gemini_function_declarations",
    "gemini_model_path",
    "gemini_parameters",
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
Schema = dict[str, Any]


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
    """What a result needs from its call: our id, the name, Gemini's id if any."""

    __slots__ = ("id", "name", "native_id")

    def __init__(self, call_id: str, name: str, native_id: str | None) -> None:
        self.id = call_id
        self.name = name
        self.native_id = native_id


def _model_parts(
    wire: Mapping[str, Any], metadata: Mapping[str, Any] | None
) -> tuple[list[Part], list[_Call]]:
    """Parts of one assistant message, and its calls (for pairing the results)."""
    parts: list[Part] = [] if _is_blank(wire["content"]) else [{"text": wire["content"]}]
    native = _native_calls(metadata)
    calls: list[_Call] = []
    for raw in wire.get("tool_calls") or []:
        # Back through ToolCall so arguments_object applies the one rule for
        # raw (non-object) arguments: they become {} on object wires.
        call = ToolCall.from_dict(raw)
        info = native.get(call.id)
        native_id = _native_value(info, "id")
        function: dict[str, Any] = {"name": call.name, "args": arguments_object(call)}
        if native_id is not None:
            function = {"id": native_id, **function}
        part: Part = {"functionCall": function}
        signature = _native_value(info, "thought_signature")
        if signature is not None:
            part["thoughtSignature"] = signature
        parts.append(part)
        calls.append(_Call(call.id, call.name, native_id))
    return parts, calls


def _response_object(text: str) -> dict[str, Any]:
    # Gemini wants an object; "output" is its documented key for plain output.
    decoded = decode_arguments(text)
    return decoded if decoded is not None else {"output": text}


class _Responses:
    """The responses owed to the last model turn with calls, in call order.

    Built empty (``index=-1``, no calls) when nothing is owed: every tool
    message is then an orphan.
    """

    def __init__(self, index: int = -1, calls: Sequence[_Call] = ()) -> None:
        self.index = index
        self.calls = {call.id: call for call in calls}
        self.order = [call.id for call in calls]
        self.parts: dict[str, Part] = {}

    def add(self, wire: Mapping[str, Any], index: int) -> None:
        call_id = wire.get("tool_call_id")
        if call_id is None:
            raise InvalidArgumentError(
                "a tool message needs the id of the call it answers",
                code="missing_tool_call_id",
                field=f"{index}/tool_call_id",
            )
        call = self.calls.get(call_id)
        if call is None:
            raise InvalidArgumentError(
                f"tool message answers {call_id!r}, which is not a call of the assistant "
                "turn right before it",
                code="unknown_tool_call_id",
                field=f"{index}/tool_call_id",
            )
        if call_id in self.parts:
            raise InvalidArgumentError(
                f"call {call_id!r} is answered twice",
                code="duplicate_tool_result",
                field=f"{index}/tool_call_id",
            )
        response: dict[str, Any] = {
            "name": call.name,
            "response": _response_object(wire["content"]),
        }
        if call.native_id is not None:
            response = {"id": call.native_id, **response}
        self.parts[call_id] = {"functionResponse": response}

    def close(self) -> list[Part]:
        """The ``functionResponse`` parts in call order; every call must be answered."""
        missing = [call_id for call_id in self.order if call_id not in self.parts]
        if missing:
            raise InvalidArgumentError(
                f"tool call(s) {', '.join(map(repr, missing))} have no result before the "
                "next turn; Gemini needs one response per call",
                code="unanswered_tool_call",
                field=f"{self.index}/tool_calls/{self.order.index(missing[0])}/id",
            )
        return [self.parts[call_id] for call_id in self.order]


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
    owed = _Responses()
    for index, message in enumerate(messages):
        wire = message.to_dict()
        calls: list[_Call] = []
        match message.role:
            case Role.SYSTEM:
                continue  # lifted into systemInstruction
            case Role.TOOL:
                owed.add(wire, index)
                continue
            case Role.USER:
                role = "user"
                parts: list[Part] = (
                    [] if _is_blank(wire["content"]) else [{"text": wire["content"]}]
                )
            case Role.ASSISTANT:
                role = "model"
                parts, calls = _model_parts(wire, message.provider_metadata)
            case _:  # pragma: no cover - Role is a closed enum
                assert_never(message.role)
        if not parts:
            continue  # blank text: nothing to send, nothing lost
        if owed.order:
            _append(contents, "user", owed.close(), responses=True)
            owed = _Responses()
        _append(contents, role, parts, responses=False)
        if calls:
            if len(contents) == 1:
                raise InvalidArgumentError(
                    "Gemini needs a user turn before the first tool call",
                    code="invalid_turn_order",
                    field=f"{index}/tool_calls",
                )
            owed = _Responses(index, calls)
    if owed.order:
        _append(contents, "user", owed.close(), responses=True)
    if not contents:
        raise InvalidArgumentError(
            "the conversation has no user or assistant text to send",
            code="no_messages",
            field="messages",
        )
    return [{"role": role, "parts": parts} for role, parts, _ in contents]


# Tool schemas ---------------------------------------------------------------------

_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "array", "object"})
_FORMATS: Final[Mapping[str, frozenset[str]]] = {
    "string": frozenset({"enum", "date-time"}),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}
# Copied unchanged. Everything else is dropped: Gemini's ``parameters`` is an
# OpenAPI 3.0 subset and answers 400 to any keyword outside it
# (additionalProperties, $schema, const, exclusiveMinimum, propertyNames, ...).
_KEPT: Final = (
    "nullable",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "propertyOrdering",
)
_DEFAULT_ITEMS: Final[Schema] = {"type": "string"}
_REF: Final = re.compile(r"#/(?:\$defs|definitions)/(.+)")


class SchemaNotExpressible(Exception):
    """A schema the OpenAPI subset cannot hold (a recursive or external ``$ref``)."""


def _resolve(
    node: Mapping[str, Any], defs: Mapping[str, Any], trail: tuple[str, ...]
) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """Inline local ``$ref`` s (Gemini has none); siblings of a ``$ref`` win."""
    while isinstance(node.get("$ref"), str):
        found = _REF.fullmatch(node["$ref"])
        name = found.group(1).replace("~1", "/").replace("~0", "~") if found else None
        if name is None or not isinstance(defs.get(name), Mapping):
            raise SchemaNotExpressible(f"unresolvable $ref {node['$ref']!r}")
        if name in trail:
            raise SchemaNotExpressible(f"recursive $ref {node['$ref']!r}")
        trail = (*trail, name)
        node = {**defs[name], **{key: value for key, value in node.items() if key != "$ref"}}
    return node, trail


def _merge(target: Schema, source: Schema) -> None:
    """Fold a converted subschema in: properties and required unite, the rest fills gaps."""
    for key, value in source.items():
        if key == "properties":
            target.setdefault("properties", {}).update(value)
        elif key == "required":
            target.setdefault("required", []).extend(value)
        else:
            target.setdefault(key, value)


def _apply_type(target: Schema, declared: Any) -> None:
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list):
        return
    names = [name.lower() for name in names if isinstance(name, str)]
    if "null" in names:
        target["nullable"] = True  # OpenAPI 3.0 has no "null" type
    real = [name for name in names if name in _TYPES]
    if len(real) == 1:
        target["type"] = real[0]
    elif real:
        target["anyOf"] = [{"type": name} for name in real]


def _convert(
    node: Any, defs: Mapping[str, Any], trail: tuple[str, ...], *, tidy: bool = True
) -> Schema:
    """One schema node converted; ``tidy=False`` for a part that is merged into another."""
    if not isinstance(node, Mapping):
        return {}  # a boolean schema: anything goes
    node, trail = _resolve(node, defs, trail)
    out: Schema = {}
    hints: list[str] = []
    for sub in node.get("allOf") or ():
        _merge(out, _convert(sub, defs, trail, tidy=False))
    _apply_type(out, node.get("type"))
    variants = node.get("anyOf") or node.get("oneOf")
    if isinstance(variants, list):
        kept: list[Any] = []
        for variant in variants:
            if isinstance(variant, Mapping) and variant.get("type") == "null":
                out["nullable"] = True  # Optional[X] is anyOf [X, null]
            else:
                kept.append(variant)
        if len(kept) == 1:
            _merge(out, _convert(kept[0], defs, trail, tidy=False))
        elif kept:
            out["anyOf"] = [_convert(variant, defs, trail) for variant in kept]
    properties = node.get("properties")
    if isinstance(properties, Mapping) and properties:
        out.setdefault("properties", {}).update(
            {str(name): _convert(sub, defs, trail) for name, sub in properties.items()}
        )
    required = node.get("required")
    if isinstance(required, list):
        out.setdefault("required", []).extend(r for r in required if isinstance(r, str))
    items = node.get("items")
    if isinstance(items, list):
        items = items[0] if items else None  # tuple form: the first shape stands for all
    if isinstance(items, Mapping):
        out["items"] = _convert(items, defs, trail)
    if out.get("type") == "array" and not out.get("items"):
        out["items"] = dict(_DEFAULT_ITEMS)  # "items: missing field" otherwise
    values = [node["const"]] if "const" in node else node.get("enum")
    if isinstance(values, list) and values:
        if all(isinstance(value, str) for value in values):
            out["enum"] = list(values)
            out.setdefault("type", "string")  # Gemini's enums are string enums
        else:  # Gemini's enum holds strings only; tell the model in words instead
            hints.append("one of: " + ", ".join(json.dumps(value) for value in values))
    fmt = node.get("format")
    if isinstance(fmt, str):
        if fmt in _FORMATS.get(out.get("type", ""), frozenset()):
            out["format"] = fmt
        elif out.get("type") == "string":
            hints.append(f"format: {fmt}")
    if "default" in node:
        hints.append(f"default: {json.dumps(node['default'])}")
    for key in _KEPT:
        if key in node:
            out[key] = copy.deepcopy(node[key])
    description = node.get("description")
    text = description if isinstance(description, str) else ""
    if hints:
        note = "; ".join(hints)
        text = f"{text} ({note})" if text else note
    if text:
        out["description"] = text
    return _tidy(out) if tidy else out


def _tidy(out: Schema) -> Schema:
    # Empty properties are a 400 ("should be non-empty for OBJECT type"), and
    # required names must exist among the properties.
    properties = out.get("properties") or {}
    if properties and "type" not in out:
        out["type"] = "object"
    required = [name for name in dict.fromkeys(out.pop("required", [])) if name in properties]
    if not properties:
        out.pop("properties", None)
    if required:
        out["required"] = required
    return out


def gemini_parameters(schema: Mapping[str, Any]) -> Schema | None:
    """A tool's JSON Schema in the OpenAPI subset Gemini's ``parameters`` accepts.

    ``None`` when the tool takes no arguments (``parameters`` is then omitted:
    an object with empty ``properties`` is a 400). Keywords outside the subset
    are dropped; what the model should still know is moved into the
    description (``format`` other than ``enum``/``date-time``, ``default``,
    non-string ``enum``/``const``). Local ``$ref`` s are inlined, ``type``
    lists become ``nullable``/``anyOf``, ``oneOf`` becomes ``anyOf``, ``allOf``
    is merged, arrays get ``items``. Raises :class:`SchemaNotExpressible` for a
    recursive or unresolvable ``$ref``.
    """
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        found = schema.get(key)
        if isinstance(found, Mapping):
            defs.update(found)
    converted = _convert(schema, defs, ())
    return converted if converted.get("properties") else None


def gemini_function_declarations(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """One ``functionDeclarations`` entry per tool.

    A schema the OpenAPI subset cannot express (recursive ``$ref``) is sent
    whole as ``parametersJsonSchema``, Gemini's full-JSON-Schema alternative.
    """
    declarations: list[dict[str, Any]] = []
    for spec in tools:
        entry: dict[str, Any] = {"name": spec.name}
        if spec.description:
            entry["description"] = spec.description
        try:
            parameters = gemini_parameters(spec.parameters)
        except SchemaNotExpressible:
            entry["parametersJsonSchema"] = copy.deepcopy(dict(spec.parameters))
        else:
            if parameters is not None:
                entry["parameters"] = parameters
        declarations.append(entry)
    return declarations


def gemini_tool_config(
    options: CompletionOptions, tools: Sequence[ToolSpec]
) -> dict[str, Any] | None:
    """``toolConfig``, or ``None`` to leave Gemini's default (AUTO).

    Gemini has no switch for parallel calls; ``parallel_tool_calls`` is ignored.
    """
    config: dict[str, Any]
    match options.tool_choice:
        case None:
            return None
        case "auto":
            config = {"mode": "AUTO"}
        case "none":
            config = {"mode": "NONE"}
        case "required":
            config = {"mode": "ANY"}
        case name:
            if name not in {spec.name for spec in tools}:
                raise InvalidArgumentError(
                    f"tool_choice names {name!r}, which is not among the offered tools",
                    code="unknown_tool_choice",
                    field="tool_choice",
                )
            config = {"mode": "ANY", "allowedFunctionNames": [name]}
    return {"functionCallingConfig": config}


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
        payload["contents"] = gemini_contents(messages)
        if tools:
            payload["tools"] = [{"functionDeclarations": gemini_function_declarations(tools)}]
            config = gemini_tool_config(options, tools)
            if config is not None:
                payload["toolConfig"] = config
        generation: dict[str, Any] = {}
        if options.temperature is not None:
            generation["temperature"] = options.temperature
        if options.max_tokens is not None:
            generation["maxOutputTokens"] = options.max_tokens
        if options.stop:
            generation["stopSequences"] = list(options.stop)
        if generation:
            payload["generationConfig"] = generation
        _merge_extra(payload, options.extra)
        return payload

    def parse_response(
        self, body: Mapping[str, Any], *, known_ids: Collection[str] = ()
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
                        name if isinstance(name, str) else "",
                        function.get("args"),
                    )
                )
                signature = part.get("thoughtSignature")
                signatures.append(signature if isinstance(signature, str) and signature else None)
            elif isinstance(text, str):
                (thoughts if part.get("thought") is True else texts).append(text)
            else:
                # Code execution and inline data: we offer no such tools.
                logger.warning("gemini response: ignored a part with keys %s", sorted(part))
        calls = assign_call_ids(candidates, known_ids=known_ids, provider=self.provider_name)
        native = _native_metadata(calls, candidates, signatures)
        thinking = "".join(thoughts)
        return CompletionResponse(
            content="".join(texts),
            model=model,
            usage=usage,
            finish_reason="tool_calls" if calls else _finish_reason(candidate.get("finishReason")),
            provider=self.provider_name,
            tool_calls=calls,
            thinking=thinking or None,
            provider_metadata={METADATA_KEY: {"calls": native}} if native else {},
        )

    def _url(self, options: CompletionOptions) -> str:
        return f"{self.base_url}/models/{gemini_model_path(options.model)}:generateContent"

    def _auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key or ""}


def _native_metadata(
    calls: Sequence[ToolCall] | None,
    candidates: Sequence[tuple[str | None, str, Any]],
    signatures: Sequence[str | None],
) -> dict[str, dict[str, str]]:
    """``{our_call_id: {"id"?, "thought_signature"?}}`` for the calls Gemini marked."""
    # assign_call_ids drops exactly the nameless candidates, in order.
    kept = [
        (native_id, signature)
        for (native_id, name, _), signature in zip(candidates, signatures, strict=True)
        if name
    ]
    native: dict[str, dict[str, str]] = {}
    for call, (native_id, signature) in zip(calls or (), kept, strict=True):
        entry: dict[str, str] = {}
        if native_id is not None:
            entry["id"] = native_id
        if signature is not None:
            entry["thought_signature"] = signature
        if entry:
            native[call.id] = entry
    return native
