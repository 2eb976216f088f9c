"""Anthropic Messages API (``POST /v1/messages``): history in, one message out.

The history arrives as ``ChatMessage`` objects and is read through
:meth:`ChatMessage.to_dict` (the one place the OpenAI wire shape is made); only
``provider_metadata``, which is not part of that shape, is read from the
message itself. What changes on the way to Anthropic, and why (each rule is an
HTTP 400 otherwise, per the Messages API reference and its error messages):

- System messages are joined, in order, into the top-level ``system``.
- An assistant turn with calls becomes content blocks: replayed thinking
  blocks, a text block when there is text, then one ``tool_use`` per call with
  ``input`` as an object (``raw_arguments`` that are not an object become ``{}``).
- Each run of tool messages becomes ONE user message of ``tool_result`` blocks
  in call order, and a user text that follows joins that message after them.
  A result flagged ``is_error`` carries ``"is_error": true`` (absent otherwise).
- Every call must be answered by the next user message and every result must
  answer a call of the assistant turn right before it: a history that breaks
  this raises :class:`InvalidArgumentError` instead of being sent.
- Empty text is never sent: blank text produces no block, and a message left
  with no block is skipped (it carries nothing). No call or result is ever
  dropped this way, because ``tool_use``/``tool_result`` blocks always exist
  (a blank result keeps its block, without ``content``). A final assistant
  text (a prefill) loses its trailing whitespace.
- Call ids are rewritten to ``^[a-zA-Z0-9_-]+$`` with :func:`stable_alias`, the
  same way on a call and on its result.
- Consecutive same-role messages are merged so that roles alternate.

Thinking blocks (with their signatures) are kept in the response's
``provider_metadata`` as ``{"anthropic": {"thinking_blocks": [...]}}`` and
replayed before the turn's ``tool_use`` blocks: Anthropic requires them there
when extended thinking is on, and ignores them otherwise.

A streamed answer (``"stream": true``) is read by
:class:`~conversations.providers.anthropic_stream.AnthropicStreamParser`, which
rebuilds the whole body and parses it here. A turn the API paused
(``pause_turn``) is continued by :mod:`.anthropic_pause` into one answer.
"""

from __future__ import annotations

import copy
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
from conversations.exceptions import ProviderResponseError

from .anthropic_pause import PauseTurnContinuation
from .anthropic_server_tools import (
    METADATA_KEY,
    anthropic_activity,
    anthropic_citations,
    anthropic_server_tools,
    has_server_blocks,
)
from .base import (
    CompletionOptions,
    arguments_object,
    assign_call_ids,
    join_system_messages,
    stable_alias,
    token_count,
)
from .caching import with_cache_breakpoints
from .conversion import require_offered_tool
from .pairing import OwedResults
from .parts import anthropic_blocks
from .structured import anthropic_output

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "METADATA_KEY",
    "AnthropicProvider",
    "anthropic_messages",
    "anthropic_tool_choice",
    "anthropic_tools",
    "anthropic_usage",
    "wire_call_id",
]

logger = logging.getLogger("conversations.providers")

ANTHROPIC_VERSION: Final = "2023-06-01"
"""The ``anthropic-version`` header this adapter speaks."""
DEFAULT_MAX_TOKENS: Final = 4096
"""``max_tokens`` is required by the API; used when the options leave it open."""

_ID_PATTERN: Final = re.compile(r"[a-zA-Z0-9_-]+")
_THINKING_TYPES: Final = frozenset({"thinking", "redacted_thinking"})
_STOP_REASONS: Final[Mapping[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    # Still paused after the last continuation (see .anthropic_pause): incomplete.
    "pause_turn": "length",
}

Block = dict[str, Any]
_UNANSWERED: Final = "Anthropic refuses a tool_use without its tool_result"


# Request mapping (pure) ---------------------------------------------------------


def wire_call_id(call_id: str) -> str:
    """The id Anthropic accepts for a stored call id (deterministic: call and result agree)."""
    return stable_alias(call_id, pattern=_ID_PATTERN)


def _is_blank(text: str) -> bool:
    # The API refuses empty text and text that is only whitespace.
    return not text.strip()


def _text_blocks(text: str) -> list[Block]:
    return [] if _is_blank(text) else [{"type": "text", "text": text}]


def _thinking_blocks(metadata: Mapping[str, Any] | None) -> list[Block]:
    """The thinking blocks stored with an assistant turn, exactly as received."""
    ours = (metadata or {}).get(METADATA_KEY)
    stored = ours.get("thinking_blocks") if isinstance(ours, Mapping) else None
    if not isinstance(stored, list):
        return []
    return [
        copy.deepcopy(dict(block))
        for block in stored
        if isinstance(block, Mapping) and block.get("type") in _THINKING_TYPES
    ]


def _tool_use_block(call: Mapping[str, Any]) -> Block:
    # Back through ToolCall so arguments_object applies the one rule for
    # raw (non-object) arguments: they become {} on object wires.
    decoded = ToolCall.from_dict(call)
    return {
        "type": "tool_use",
        "id": wire_call_id(decoded.id),
        "name": decoded.name,
        "input": arguments_object(decoded),
    }


def _tool_result_block(call_id: str, message: ChatMessage) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": wire_call_id(call_id)}
    # content is optional; blank content is a 400 ("must contain non-whitespace text").
    if message.parts:
        # Images and documents go in the result itself, beside its text.
        block["content"] = _text_blocks(message.content) + anthropic_blocks(message.parts)
    elif not _is_blank(message.content):
        block["content"] = message.content
    if message.is_error:
        block["is_error"] = True  # Claude then explains or retries instead of trusting it
    return block


def _stored_content(metadata: Mapping[str, Any] | None) -> list[Block] | None:
    """The content of a turn that used server tools, as received (``tool_use`` blocks aside)."""
    ours = (metadata or {}).get(METADATA_KEY)
    stored = ours.get("content") if isinstance(ours, Mapping) else None
    if not isinstance(stored, list):
        return None
    return [copy.deepcopy(dict(block)) for block in stored if isinstance(block, Mapping)]


def _assistant_blocks(wire: Mapping[str, Any], metadata: Mapping[str, Any] | None) -> list[Block]:
    """Blocks of one assistant message; ``[]`` when it has neither text nor calls."""
    calls = wire.get("tool_calls") or []
    stored = _stored_content(metadata)
    if stored:
        # Server tool blocks, citations and thinking go back exactly as they came.
        return stored + [_tool_use_block(call) for call in calls]
    text = _text_blocks(wire["content"])
    if not calls and not text:
        # Nothing to say: thinking blocks alone would be an assistant turn
        # without content, which the API refuses.
        return []
    return _thinking_blocks(metadata) + text + [_tool_use_block(call) for call in calls]


def _append(turns: list[tuple[str, list[Block]]], role: str, blocks: list[Block]) -> None:
    # Merging keeps roles alternating and puts a user text after the results.
    if turns and turns[-1][0] == role:
        turns[-1][1].extend(blocks)
    else:
        turns.append((role, blocks))


def _check_aliases(messages: Sequence[ChatMessage]) -> None:
    """Two stored ids must never share a wire id, or results would pair wrongly."""
    originals: dict[str, str] = {}
    for index, message in enumerate(messages):
        for position, call in enumerate(message.tool_calls or ()):
            alias = wire_call_id(call.id)
            if originals.setdefault(alias, call.id) != call.id:
                raise InvalidArgumentError(
                    f"call ids {originals[alias]!r} and {call.id!r} map to the same "
                    f"wire id {alias!r}",
                    code="call_id_collision",
                    field=f"{index}/tool_calls/{position}/id",
                )


def _finish(turns: list[tuple[str, list[Block]]]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    for role, blocks in turns:
        if role == "assistant":
            # Thinking opens the turn even when an earlier text message was
            # merged in front of it (stable sort: their order is kept).
            blocks.sort(key=lambda block: block["type"] not in _THINKING_TYPES)
        content: str | list[Block] = blocks
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            content = blocks[0]["text"]
        result.append({"role": role, "content": content})
    last = result[-1]
    if last["role"] == "assistant":
        # A final assistant turn is a prefill; trailing whitespace there is a 400.
        if isinstance(last["content"], str):
            last["content"] = last["content"].rstrip()
        elif last["content"][-1]["type"] == "text":
            last["content"][-1]["text"] = last["content"][-1]["text"].rstrip()
    return result


def anthropic_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The ``messages`` array (system messages excluded: they go to ``system``).

    Raises :class:`InvalidArgumentError` (``field`` is the message index) for a
    tool message without a call id, one answering a call that is not in the
    assistant turn right before it, a call answered twice, a call left
    unanswered, two call ids sharing a wire id, or a history with nothing to send.
    """
    _check_aliases(messages)
    turns: list[tuple[str, list[Block]]] = []
    owed: OwedResults[Block] = OwedResults()
    for index, message in enumerate(messages):
        match message.role:
            case Role.SYSTEM:
                continue  # lifted into the top-level ``system``
            case Role.TOOL:
                call_id = owed.answered_call(message, index)
                owed.add(call_id, _tool_result_block(call_id, message))
                continue
            case Role.USER:
                role, blocks = "user", anthropic_blocks(message.parts, text=message.content)
            case Role.ASSISTANT:
                wire = message.to_dict()
                role, blocks = "assistant", _assistant_blocks(wire, message.provider_metadata)
            case _:  # pragma: no cover - Role is a closed enum
                assert_never(message.role)
        if not blocks:
            continue  # blank text: nothing to send, nothing lost
        if owed.owed:
            _append(turns, "user", owed.close())
            owed = OwedResults()
        _append(turns, role, blocks)
        if message.tool_calls:
            owed = OwedResults(
                index=index,
                call_ids=[call.id for call in message.tool_calls],
                refusal=_UNANSWERED,
            )
    if owed.owed:
        _append(turns, "user", owed.close())
    if not turns:
        raise InvalidArgumentError(
            "the conversation has no user or assistant text to send",
            code="no_messages",
            field="messages",
        )
    return _finish(turns)


def anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The ``tools`` array: ``{name, description, input_schema}`` per tool."""
    result: list[dict[str, Any]] = []
    for spec in tools:
        entry: dict[str, Any] = {"name": spec.name}
        if spec.description:
            entry["description"] = spec.description
        entry["input_schema"] = copy.deepcopy(dict(spec.parameters))
        result.append(entry)
    return result


def anthropic_tool_choice(options: CompletionOptions, tools: Sequence[ToolSpec]) -> Block | None:
    """``tool_choice``, or ``None`` to leave Anthropic's default (auto)."""
    choice: Block | None
    match options.tool_choice:
        case None:
            choice = None
        case "auto":
            choice = {"type": "auto"}
        case "none":
            choice = {"type": "none"}
        case "required":
            choice = {"type": "any"}
        case name:
            require_offered_tool(name, tools)
            choice = {"type": "tool", "name": name}
    if options.parallel_tool_calls is False:
        choice = choice or {"type": "auto"}
        # With "none" no tool is called at all; the flag does not exist there.
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    return choice


# Response mapping (pure) --------------------------------------------------------


def _count(data: Mapping[str, Any], name: str) -> int:
    return token_count(data.get(name), f"usage {name}", provider="anthropic")


def anthropic_usage(data: Any) -> Usage:
    """:class:`Usage` from Anthropic's ``usage``: its ``input_tokens`` exclude cache tokens.

    The usage object has no separate thinking-token count: thinking is billed
    inside ``output_tokens``, so it is part of ``completion_tokens`` and
    ``reasoning_tokens`` stays 0 (a split would be a guess).
    """
    if data is None:
        return Usage()
    if not isinstance(data, Mapping):
        raise ProviderResponseError(f"anthropic: usage is not an object: {type(data).__name__}")
    cache_read = _count(data, "cache_read_input_tokens")
    prompt = _count(data, "input_tokens") + _count(data, "cache_creation_input_tokens") + cache_read
    completion = _count(data, "output_tokens")
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cached_prompt_tokens=cache_read,
    )


def _content_blocks(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = body.get("content")
    if not isinstance(content, list):
        raise ProviderResponseError(
            f"anthropic: the response content is not a list: {type(content).__name__}"
        )
    blocks = [block for block in content if isinstance(block, Mapping)]
    if len(blocks) != len(content):
        raise ProviderResponseError("anthropic: a content block is not an object")
    return blocks


def _finish_reason(body: Mapping[str, Any]) -> str:
    """``stop_reason`` in OpenAI's words, for a response without (usable) calls."""
    stop_reason = body.get("stop_reason")
    mapped = _STOP_REASONS.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"
    # "tool_use" whose every call was dropped (no name) leaves nothing to run.
    return "stop" if mapped == "tool_calls" else mapped


# The adapter ---------------------------------------------------------------------


class AnthropicProvider(PauseTurnContinuation):
    """Anthropic's Messages API (``POST {base_url}/v1/messages``)."""

    provider_name = "anthropic"
    provider_tool_kinds = frozenset({"web_search", "code_execution"})
    default_base_url = "https://api.anthropic.com"
    # Current Claude models answer 400 to temperature, top_p and top_k; a model
    # that still takes them says so in LanguageModel.sampling_parameters.
    default_sampling_parameters = frozenset()

    def build_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """The Messages body (pure); ``options.extra`` is merged last."""
        payload: dict[str, Any] = {
            "model": options.model,
            "max_tokens": options.max_tokens or DEFAULT_MAX_TOKENS,
        }
        # Blank system text is refused too ("must contain non-whitespace text").
        system = join_system_messages(m for m in messages if not _is_blank(m.content))
        if system:
            payload["system"] = system
        payload["messages"] = anthropic_messages(messages)
        offered = anthropic_tools(tools) + anthropic_server_tools(options.provider_tools)
        if offered:
            payload["tools"] = offered
        # tool_choice without tools is refused, so both travel together or not at all.
        if tools:
            choice = anthropic_tool_choice(options, tools)
            if choice is not None:
                payload["tool_choice"] = choice
        if options.temperature is not None and self.sends("temperature", options):
            # Anthropic's range is [0, 1]; OpenAI-style values up to 2 are clamped.
            payload["temperature"] = min(float(options.temperature), 1.0)
        if options.stop:
            payload["stop_sequences"] = list(options.stop)
        if options.output_schema is not None:
            thinking = options.extra.get("thinking")
            payload.update(
                anthropic_output(
                    options.output_schema,
                    model=options.model,
                    thinking=isinstance(thinking, Mapping) and thinking.get("type") != "disabled",
                    tools_offered=bool(tools),
                )
            )
        return with_cache_breakpoints(payload, options)  # options.extra merged, then marks

    def parse_response(
        self,
        body: Mapping[str, Any],
        *,
        known_ids: Collection[str] = (),
        tools: Sequence[ToolSpec] = (),
    ) -> CompletionResponse:
        """One Messages response (pure): text, thinking, calls, finish reason, usage."""
        texts: list[str] = []
        thoughts: list[str] = []
        thinking_blocks: list[Block] = []
        candidates: list[tuple[str | None, str, Any]] = []
        for block in _content_blocks(body):
            match block.get("type"):
                case "text":
                    texts.append(str(block.get("text") or ""))
                case "thinking":
                    thoughts.append(str(block.get("thinking") or ""))
                    thinking_blocks.append(copy.deepcopy(dict(block)))
                case "redacted_thinking":
                    thinking_blocks.append(copy.deepcopy(dict(block)))
                case "tool_use":
                    call_id, name = block.get("id"), block.get("name")
                    candidates.append(
                        (
                            call_id if isinstance(call_id, str) else None,
                            name if isinstance(name, str) else "",
                            block.get("input"),
                        )
                    )
                case "server_tool_use":
                    pass  # read below, with the result blocks that answer them
                case other if not has_server_blocks([block]):
                    logger.warning("anthropic response: ignored a %r content block", other)
        calls = assign_call_ids(candidates, known_ids=known_ids, provider=self.provider_name)
        blocks = _content_blocks(body)
        namespace: dict[str, Any] = {}
        if thinking_blocks:
            namespace["thinking_blocks"] = thinking_blocks
        if has_server_blocks(blocks):
            namespace["content"] = [
                copy.deepcopy(dict(block)) for block in blocks if block.get("type") != "tool_use"
            ]
        finish_reason = "tool_calls" if calls is not None else _finish_reason(body)
        model = body.get("model")
        thinking = "".join(thoughts)
        return CompletionResponse(
            content="".join(texts),
            model=model if isinstance(model, str) else "",
            usage=anthropic_usage(body.get("usage")),
            finish_reason=finish_reason,
            provider=self.provider_name,
            tool_calls=calls,
            thinking=thinking or None,
            provider_metadata={METADATA_KEY: namespace} if namespace else {},
            provider_tool_calls=tuple(anthropic_activity(blocks)),
            citations=tuple(anthropic_citations(blocks)),
        )

    def _url(self, options: CompletionOptions) -> str:
        return f"{self.base_url}/v1/messages"

    def _auth_headers(self) -> dict[str, str]:
        return {"x-api-key": self._api_key or "", "anthropic-version": ANTHROPIC_VERSION}
