"""OpenAI Chat Completions, and the servers that speak it (Mistral, Groq, Azure, ...).

The request body is the history as :meth:`ChatMessage.to_dict` makes it (the
one place the OpenAI wire shape is produced), with three adjustments: an
assistant turn that only calls tools sends ``content: null``, call ids are
rewritten where a service has stricter id rules (Mistral's 9 characters,
OpenAI's 40-character limit), and ``tools``/``tool_choice``/``parallel_tool_calls``
appear only when tools are offered (``tools: []`` is an HTTP 400).

Services that differ only in URL, headers or such rules are *presets* of the one
adapter: ``OpenAIProvider(api_key=..., preset="mistral")``. :data:`PRESETS` maps
a preset name (as a ``Provider`` record stores it) to its :class:`OpenAIPreset`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, assert_never

import httpx

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    Role,
    ToolSpec,
    Usage,
)
from conversations.exceptions import ProviderResponseError

from .base import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_STREAM_SECONDS,
    TOOL_CHOICE_KEYWORDS,
    CompletionOptions,
    HTTPProvider,
    assign_call_ids,
    stable_alias,
    token_count,
)
from .conversion import answered_call_id, require_offered_tool
from .openai_stream import OpenAIStreamParser
from .parts import openai_tool_files
from .streaming import StreamParser
from .structured import openai_response_format

__all__ = [
    "AZURE_STREAM_OPTIONS_SINCE",
    "DEFAULT_AZURE_API_VERSION",
    "PRESETS",
    "OpenAIPreset",
    "OpenAIProvider",
    "answered_call_id",
    "call_candidates",
    "openai_messages",
    "openai_tool_choice",
    "openai_usage",
    "token_count",
]

DEFAULT_AZURE_API_VERSION: Final = "2024-10-21"
"""The latest GA data-plane inference version when this adapter was written."""
AZURE_STREAM_OPTIONS_SINCE: Final = "2024-09-01"
"""The first Azure ``api-version`` that takes ``stream_options`` (older ones refuse it)."""

_MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
_NEVER = re.compile(r"(?!)")  # makes stable_alias hash every id it is given
_AZURE_DEPLOYMENT = re.compile(r"(?!\.{1,2}\Z)[A-Za-z0-9._-]+")  # in the URL path: no "." or ".."
_API_VERSION = re.compile(r"[A-Za-z0-9.-]+")


@dataclass(frozen=True, slots=True)
class OpenAIPreset:
    """How one OpenAI-compatible service differs from the others."""

    name: str
    """The preset's name; also the ``provider`` of the responses it parses."""
    base_url: str | None
    """The public endpoint; ``None`` when every user has their own (a base URL is required)."""
    max_tokens_key: str = "max_tokens"
    """The body key for ``max_tokens`` (OpenAI itself: ``max_completion_tokens``)."""
    call_id_length: int | None = None
    """Ids must be exactly this many ``[a-zA-Z0-9]`` characters (Mistral: 9)."""
    max_call_id_length: int | None = 40
    """Longer ids are hashed to this length: OpenAI refuses ids over 40 characters
    (from issue reports), and servers copying its schema may too."""
    azure: bool = False
    """Azure OpenAI: deployment in the path, ``api-version`` query, ``api-key`` header."""
    stream_usage_option: bool = True
    """Whether a streamed request asks for usage with ``stream_options`` (Mistral refuses
    the key with HTTP 422 and reports usage in its last chunk anyway)."""

    def wire_call_id(self, call_id: str) -> str:
        """The id to send for a stored call id (deterministic, so call and result agree)."""
        if self.call_id_length is not None:
            return stable_alias(call_id, pattern=_MISTRAL_ID, length=self.call_id_length)
        if self.max_call_id_length is not None and len(call_id) > self.max_call_id_length:
            return stable_alias(call_id, pattern=_NEVER, length=self.max_call_id_length)
        return call_id


PRESETS: Final[Mapping[str, OpenAIPreset]] = {
    preset.name: preset
    for preset in (
        OpenAIPreset(
            "openai",
            "https://api.openai.com/v1",
            # max_tokens is refused by reasoning models; this key works for all.
            max_tokens_key="max_completion_tokens",
        ),
        OpenAIPreset("openai_compatible", None),
        OpenAIPreset(
            "mistral", "https://api.mistral.ai/v1", call_id_length=9, stream_usage_option=False
        ),
        # Groq refuses unknown message keys; to_dict() only ever makes standard ones.
        OpenAIPreset("groq", "https://api.groq.com/openai/v1"),
        OpenAIPreset("openrouter", "https://openrouter.ai/api/v1"),
        OpenAIPreset("together", "https://api.together.xyz/v1"),
        OpenAIPreset("fireworks", "https://api.fireworks.ai/inference/v1"),
        OpenAIPreset(
            "azure_openai",
            None,
            max_tokens_key="max_completion_tokens",
            azure=True,
        ),
    )
}
"""Every preset by name (the adapter names a ``Provider`` record can hold)."""


# Request mapping (pure) ---------------------------------------------------------


def openai_messages(
    messages: Sequence[ChatMessage],
    *,
    wire_id: Callable[[str], str] = str,
) -> list[dict[str, Any]]:
    """The ``messages`` array: each message's ``to_dict()``, ids mapped by ``wire_id``.

    A tool message's files follow its turn's results in a user message (tool
    messages carry text only here).

    Raises :class:`InvalidArgumentError` for a tool message that answers no
    earlier call (the API would refuse it) and for two stored ids that map to
    the same wire id (results would be paired with the wrong call).
    """
    seen_calls: set[str] = set()
    originals: dict[str, str] = {}  # wire id -> stored id

    def mapped(call_id: str, field: str) -> str:
        alias = wire_id(call_id)
        if originals.setdefault(alias, call_id) != call_id:
            raise InvalidArgumentError(
                f"call ids {originals[alias]!r} and {call_id!r} map to the same wire id {alias!r}",
                code="call_id_collision",
                field=field,
            )
        return alias

    result: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        wire = message.to_dict()
        match message.role:
            case Role.SYSTEM | Role.USER:
                pass
            case Role.ASSISTANT:
                if message.tool_calls is not None:
                    # Content is optional beside tool_calls; the spec's examples
                    # (and the reference's) send null for a calls-only turn.
                    if not message.content:
                        wire["content"] = None
                    for position, call in enumerate(wire["tool_calls"]):
                        call["id"] = mapped(call["id"], f"{index}/tool_calls/{position}/id")
                    seen_calls.update(call.id for call in message.tool_calls)
            case Role.TOOL:
                call_id = answered_call_id(message, index, seen_calls)
                wire["tool_call_id"] = mapped(call_id, f"{index}/tool_call_id")
            case _:  # pragma: no cover - Role is a closed enum
                assert_never(message.role)
        result.append(wire)
    return openai_tool_files(messages, result)


def openai_tool_choice(choice: str, tools: Sequence[ToolSpec]) -> str | dict[str, Any]:
    """``tool_choice`` in the OpenAI shape; a named tool must be one of ``tools``."""
    if choice in TOOL_CHOICE_KEYWORDS:
        return choice
    require_offered_tool(choice, tools)
    return {"type": "function", "function": {"name": choice}}


def openai_usage(data: Any, *, sides: tuple[str, str] = ("prompt", "completion")) -> Usage:
    """:class:`Usage` from a ``usage`` object with ``{side}_tokens`` counters; 0 if missing.

    ``sides`` name the input and output side (the Responses API: ``input``, ``output``).
    """
    if data is None:
        return Usage()
    if not isinstance(data, Mapping):
        raise ProviderResponseError(f"usage is not an object: {type(data).__name__}")
    prompt_key, completion_key = (f"{side}_tokens" for side in sides)
    prompt_details_key, completion_details_key = (f"{side}_tokens_details" for side in sides)
    prompt_details = data.get(prompt_details_key) or {}
    completion_details = data.get(completion_details_key) or {}
    if not isinstance(prompt_details, Mapping) or not isinstance(completion_details, Mapping):
        raise ProviderResponseError("usage details are not objects")
    total = data.get("total_tokens")
    return Usage(
        prompt_tokens=token_count(data.get(prompt_key), prompt_key),
        completion_tokens=token_count(data.get(completion_key), completion_key),
        total_tokens=None if total is None else token_count(total, "total_tokens"),
        cached_prompt_tokens=token_count(prompt_details.get("cached_tokens"), "cached_tokens"),
        reasoning_tokens=token_count(
            completion_details.get("reasoning_tokens"), "reasoning_tokens"
        ),
    )


def _message_text(message: Mapping[str, Any]) -> str:
    """The message's text: ``null`` is ``""``; text parts are joined; a refusal is the text.

    A refusal arrives in ``refusal`` (or as a ``refusal`` part) with ``content``
    null; it is what the model said, so it is kept rather than stored as "".
    """
    content = message.get("content")
    text: str
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        # Some compatible servers (Mistral's reasoning models) answer with parts.
        text = "".join(
            part[kind]
            for part in content
            if isinstance(part, Mapping)
            for kind in ("text", "refusal")
            if part.get("type") == kind and isinstance(part.get(kind), str)
        )
    else:
        raise ProviderResponseError(
            f"message content is neither text nor parts: {type(content).__name__}"
        )
    refusal = message.get("refusal")
    if not text and isinstance(refusal, str):
        return refusal
    return text


def _thinking(message: Mapping[str, Any]) -> str | None:
    # Not in OpenAI's spec: vLLM, DeepSeek and Groq expose reasoning this way.
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def call_candidates(raw_calls: Any) -> list[tuple[str | None, str, Any]]:
    """``(id, name, arguments)`` per ``tool_calls`` entry, for :func:`assign_call_ids`.

    Ollama's native calls have the same shape (with object arguments). A
    malformed entry gets no name, so it is dropped with a logged warning.
    """
    if raw_calls is None:
        return []
    if not isinstance(raw_calls, list):
        raise ProviderResponseError(f"tool_calls is not a list: {type(raw_calls).__name__}")
    candidates: list[tuple[str | None, str, Any]] = []
    for entry in raw_calls:
        entry = entry if isinstance(entry, Mapping) else {}
        function = entry.get("function")
        function = function if isinstance(function, Mapping) else {}
        call_id = entry.get("id")
        name = function.get("name")
        candidates.append(
            (
                call_id if isinstance(call_id, str) else None,
                name if isinstance(name, str) else "",
                function.get("arguments"),
            )
        )
    return candidates


# The adapter ---------------------------------------------------------------------


class OpenAIProvider(HTTPProvider):
    """OpenAI Chat Completions, or any preset of :data:`PRESETS`."""

    provider_name = "openai"
    default_base_url = "https://api.openai.com/v1"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        extra_headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_stream_seconds: float = DEFAULT_MAX_STREAM_SECONDS,
        preset: str = "openai",
        api_version: str | None = None,
    ) -> None:
        found = PRESETS.get(preset)
        if found is None:
            raise InvalidArgumentError(
                f"unknown OpenAI preset {preset!r}; known: {', '.join(PRESETS)}",
                code="unknown_preset",
                field="preset",
            )
        if not (base_url or found.base_url):
            raise InvalidArgumentError(
                f"the {preset} preset needs a base_url", code="missing_base_url", field="base_url"
            )
        if api_version is not None and not found.azure:
            raise InvalidArgumentError(
                "api_version only applies to the azure_openai preset",
                code="unexpected_api_version",
                field="api_version",
            )
        version = api_version or DEFAULT_AZURE_API_VERSION
        if not _API_VERSION.fullmatch(version):
            raise InvalidArgumentError(
                f"invalid api_version {version!r}", code="invalid_api_version", field="api_version"
            )
        super().__init__(
            api_key=api_key,
            base_url=base_url or found.base_url,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
            extra_headers=extra_headers,
            sleep=sleep,
            max_response_bytes=max_response_bytes,
            max_stream_seconds=max_stream_seconds,
        )
        self.preset = found
        self.api_version = version if found.azure else None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.preset.name} {self.base_url}>"

    def build_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """The Chat Completions body (pure)."""
        payload: dict[str, Any] = {
            "model": options.model,
            "messages": openai_messages(messages, wire_id=self.preset.wire_call_id),
        }
        # "tools: []" is a 400 ("[] is too short"), and so are tool_choice and
        # parallel_tool_calls without tools: all three come with tools or not at all.
        if tools:
            payload["tools"] = [spec.to_dict() for spec in tools]
            if options.tool_choice is not None:
                payload["tool_choice"] = openai_tool_choice(options.tool_choice, tools)
            if options.parallel_tool_calls is not None:
                payload["parallel_tool_calls"] = options.parallel_tool_calls
        if options.temperature is not None and self.sends("temperature", options):
            payload["temperature"] = options.temperature
        if options.max_tokens is not None:
            payload[self.preset.max_tokens_key] = options.max_tokens
        if options.stop:
            payload["stop"] = list(options.stop)
        if options.output_schema is not None:
            payload["response_format"] = openai_response_format(options.output_schema)
        payload.update(options.extra)
        return payload

    def parse_response(
        self,
        body: Mapping[str, Any],
        *,
        known_ids: Collection[str] = (),
        tools: Sequence[ToolSpec] = (),
    ) -> CompletionResponse:
        """The first choice of a Chat Completions body (pure).

        Call ids are kept as the service sent them (Mistral's included); a
        missing or reused id gets a fresh one.
        """
        try:
            return self._parse(body, known_ids)
        except ProviderResponseError as exc:
            raise ProviderResponseError(f"{self.preset.name}: {exc.detail}") from None

    def _parse(self, body: Mapping[str, Any], known_ids: Collection[str]) -> CompletionResponse:
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            error = body.get("error")
            detail = f": {self._redact(str(error))}" if error else ""
            raise ProviderResponseError(f"the response has no choices{detail}")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, Mapping) else None
        if not isinstance(message, Mapping):
            raise ProviderResponseError("the first choice has no message")
        calls = assign_call_ids(
            call_candidates(message.get("tool_calls")),
            known_ids=known_ids,
            provider=self.preset.name,
        )
        finish_reason = choice.get("finish_reason")
        if calls is not None:
            finish_reason = "tool_calls"
        elif not isinstance(finish_reason, str) or finish_reason == "tool_calls":
            # "tool_calls" with every call dropped (no name) would send the
            # loop looking for calls that are not there.
            finish_reason = "stop"
        model = body.get("model")
        return CompletionResponse(
            content=_message_text(message),
            model=model if isinstance(model, str) else "",
            usage=openai_usage(body.get("usage")),
            finish_reason=finish_reason,
            provider=self.preset.name,
            tool_calls=calls,
            thinking=_thinking(message),
        )

    def asks_stream_usage(self) -> bool:
        """Whether a streamed request carries ``stream_options.include_usage`` (the one place)."""
        if self.preset.azure:
            return (self.api_version or "") >= AZURE_STREAM_OPTIONS_SINCE
        return self.preset.stream_usage_option

    def build_stream_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """:meth:`build_payload` asking for a stream (and its usage, where the service takes it).

        ``stream_options`` given in ``options.extra`` are kept as given.
        """
        payload = self.build_payload(messages, tools, options)
        payload["stream"] = True
        if self.asks_stream_usage():
            payload.setdefault("stream_options", {"include_usage": True})
        return payload

    def stream_parser(
        self, *, known_ids: Collection[str] = (), tools: Sequence[ToolSpec] = ()
    ) -> StreamParser:
        """A parser for one streamed answer; see :mod:`conversations.providers.openai_stream`."""
        return OpenAIStreamParser(
            provider=self.preset.name,
            parse=self.parse_response,
            redact=self._redact,
            known_ids=known_ids,
            tools=tools,
        )

    def _url(self, options: CompletionOptions) -> str:
        if not self.preset.azure:
            return f"{self.base_url}/chat/completions"
        deployment = options.model
        if not _AZURE_DEPLOYMENT.fullmatch(deployment):
            raise InvalidArgumentError(
                f"invalid Azure deployment name {deployment!r}: use letters, digits, '.', '_', '-'",
                code="invalid_model",
                field="model",
            )
        return (
            f"{self.base_url}/openai/deployments/{deployment}/chat/completions"
            f"?api-version={self.api_version}"
        )

    def _auth_headers(self) -> dict[str, str]:
        key = self._api_key or ""  # never empty: the constructor requires a key
        if self.preset.azure:
            return {"api-key": key}
        return {"authorization": f"Bearer {key}"}
