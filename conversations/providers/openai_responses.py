"""OpenAI's Responses API (``POST /v1/responses``): history in as typed items, one response out.

The history arrives as ``ChatMessage`` objects and is read through
:meth:`ChatMessage.to_dict`; only ``provider_metadata``, which is not part of
that shape, is read from the message itself. The request's ``input`` is a list
of items:

- system, user and assistant text become messages (``{"role", "content"}``);
- an assistant turn's calls become ``function_call`` items (``call_id``,
  ``name``, ``arguments`` as the JSON text) and each tool message a
  ``function_call_output`` item with the same ``call_id`` (a result that
  answers no earlier call raises :class:`InvalidArgumentError`);
- the reasoning items of an assistant turn this adapter made go first in that
  turn, exactly as the API returned them.

Requests are stateless: ``store: false`` and ``include:
["reasoning.encrypted_content"]`` by default, so the API keeps nothing and
returns each reasoning item with its encrypted content. Those items are kept
in the response's ``provider_metadata`` as ``{"openai_responses":
{"reasoning": [...], "call_items": {call_id: item_id}}}`` and replayed on the
next request of this adapter; no other adapter reads that namespace, so a
conversation that moves to another provider sends none of it. A reasoning
item without encrypted content is not replayed (with ``store: false`` the API
could not look it up). ``options.extra`` may override ``store`` and
``include`` like any other key.

The Responses API has no stop sequences: ``stop`` is refused rather than
silently dropped. A streamed answer (``"stream": true``) is read by
:class:`~conversations.providers.openai_responses_stream.ResponsesStreamParser`,
whose result is this module's ``parse_response`` of the ``response.completed``
event's response.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, assert_never

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    Role,
    ToolSpec,
    Usage,
)
from conversations.exceptions import ProviderResponseError

from .base import TOOL_CHOICE_KEYWORDS, CompletionOptions, assign_call_ids
from .conversion import require_offered_tool
from .openai import OpenAIProvider, answered_call_id, openai_usage
from .openai_responses_stream import SUMMARY_SEPARATOR, ResponsesStreamParser, response_error
from .openai_responses_tools import (
    TOOL_ITEM_KINDS,
    responses_activity,
    responses_citations,
    responses_provider_tools,
)
from .parts import responses_content
from .structured import responses_text_format

__all__ = [
    "DEFAULT_INCLUDE",
    "METADATA_KEY",
    "RESPONSES_PRESETS",
    "OpenAIResponsesProvider",
    "responses_input",
    "responses_tool_choice",
    "responses_tools",
    "responses_usage",
]

METADATA_KEY: Final = "openai_responses"
"""This adapter's namespace inside ``provider_metadata``."""
DEFAULT_INCLUDE: Final = ("reasoning.encrypted_content",)
"""What a request asks the API to include: reasoning that can be replayed without storage."""
RESPONSES_PRESETS: Final = ("openai", "azure_openai", "openai_compatible")
"""The presets of :data:`~conversations.providers.openai.PRESETS` whose service has this API."""

_INCOMPLETE_REASONS: Final[Mapping[str, str]] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}

Item = dict[str, Any]


# Request mapping (pure) ---------------------------------------------------------


def _namespace(metadata: Mapping[str, Any] | None) -> Mapping[str, Any]:
    found = (metadata or {}).get(METADATA_KEY)
    return found if isinstance(found, Mapping) else {}


def _replayed_reasoning(metadata: Mapping[str, Any] | None) -> list[Item]:
    """The turn's reasoning items, and its provider tool items in their order among them."""
    namespace = _namespace(metadata)
    items = namespace.get("items", namespace.get("reasoning"))
    if not isinstance(items, list):
        return []
    return [
        copy.deepcopy(dict(item))
        for item in items
        if isinstance(item, Mapping)
        and (
            item.get("type") in TOOL_ITEM_KINDS
            or (
                item.get("type") == "reasoning"
                # Without its encrypted content a reasoning item is only a reference to
                # a stored response, which a stateless request cannot resolve.
                and isinstance(item.get("encrypted_content"), str)
            )
        )
    ]


def _call_items(metadata: Mapping[str, Any] | None) -> Mapping[str, Any]:
    ids = _namespace(metadata).get("call_items")
    return ids if isinstance(ids, Mapping) else {}


def responses_input(messages: Sequence[ChatMessage]) -> list[Item]:
    """The ``input`` items of the history (see the module's docstring)."""
    seen_calls: set[str] = set()
    items: list[Item] = []
    for index, message in enumerate(messages):
        match message.role:
            case Role.SYSTEM | Role.USER:
                content = responses_content(message.content, message.parts)
                items.append({"role": message.role.value, "content": content})
            case Role.ASSISTANT:
                wire = message.to_dict()
                items += _replayed_reasoning(message.provider_metadata)
                if message.content:
                    items.append({"role": "assistant", "content": message.content})
                item_ids = _call_items(message.provider_metadata)
                for call in wire.get("tool_calls") or ():
                    item: Item = {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                    }
                    item_id = item_ids.get(call["id"])
                    if isinstance(item_id, str) and item_id:
                        item["id"] = item_id
                    items.append(item)
                    seen_calls.add(call["id"])
            case Role.TOOL:
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": answered_call_id(message, index, seen_calls),
                        # Files of a result travel in it (input_image, input_file items).
                        "output": responses_content(message.content, message.parts),
                    }
                )
            case _:  # pragma: no cover - Role is a closed enum
                assert_never(message.role)
    return items


def responses_tools(tools: Sequence[ToolSpec]) -> list[Item]:
    """Function tools in the Responses shape (flat: no nested ``function`` object).

    ``strict`` is sent as ``false``: the API's default is strict mode, whose
    schema rules (every property required, no extra keys) our tools do not
    promise to follow.
    """
    result: list[Item] = []
    for spec in tools:
        entry: Item = {"type": "function", "name": spec.name}
        if spec.description:
            entry["description"] = spec.description
        entry["parameters"] = copy.deepcopy(dict(spec.parameters))
        entry["strict"] = False
        result.append(entry)
    return result


def responses_tool_choice(choice: str, tools: Sequence[ToolSpec]) -> str | Item:
    """``tool_choice``: a keyword, or ``{"type": "function", "name"}`` for one offered tool."""
    if choice in TOOL_CHOICE_KEYWORDS:
        return choice
    require_offered_tool(choice, tools)
    return {"type": "function", "name": choice}


# Response mapping (pure) --------------------------------------------------------


def responses_usage(data: Any) -> Usage:
    """:class:`Usage` from a Responses ``usage`` object (cached and reasoning tokens included)."""
    return openai_usage(data, sides=("input", "output"))


def _output_items(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    output = body.get("output")
    if not isinstance(output, list):
        raise ProviderResponseError("the response has no output list")
    return [item for item in output if isinstance(item, Mapping)]


def message_text(item: Mapping[str, Any]) -> str:
    """The text of an output ``message`` item: its ``output_text`` and ``refusal`` parts joined."""
    content = item.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        part[key]
        for part in content
        if isinstance(part, Mapping)
        for kind, key in (("output_text", "text"), ("refusal", "refusal"))
        if part.get("type") == kind and isinstance(part.get(key), str)
    )


def reasoning_summaries(item: Mapping[str, Any]) -> list[str]:
    """The non-empty summary texts of a ``reasoning`` item, in order."""
    summary = item.get("summary")
    if not isinstance(summary, list):
        return []
    return [
        part["text"]
        for part in summary
        if isinstance(part, Mapping) and isinstance(part.get("text"), str) and part["text"]
    ]


def _finish_reason(body: Mapping[str, Any]) -> str:
    if body.get("status") != "incomplete":
        return "stop"
    details = body.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, Mapping) else None
    return _INCOMPLETE_REASONS.get(reason if isinstance(reason, str) else "", "length")


# The adapter ---------------------------------------------------------------------


class OpenAIResponsesProvider(OpenAIProvider):
    """OpenAI's Responses API, at OpenAI, Azure OpenAI (its v1 API) or a compatible server.

    A sibling of the Chat Completions adapter that shares its presets (URL and
    authentication of each service), so it is built like it:
    ``OpenAIResponsesProvider(api_key=..., preset="azure_openai", base_url=...)``.
    Only the presets of :data:`RESPONSES_PRESETS` have this API; Azure's base
    URL is ``https://<resource>.openai.azure.com/openai/v1`` (no ``api_version``).
    """

    provider_name = "openai_responses"
    provider_tool_kinds = frozenset({"web_search", "file_search", "code_execution"})

    def __init__(self, *, preset: str = "openai", **settings: Any) -> None:
        if preset not in RESPONSES_PRESETS:
            raise InvalidArgumentError(
                f"the Responses API has no preset {preset!r}; known: {', '.join(RESPONSES_PRESETS)}",
                code="unknown_preset",
                field="preset",
            )
        if settings.get("api_version") is not None:
            raise InvalidArgumentError(
                "the Responses API takes no api_version (Azure's v1 API has none)",
                code="unexpected_api_version",
                field="api_version",
            )
        super().__init__(preset=preset, **settings)

    def build_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """The Responses request body (pure)."""
        if options.stop:
            raise InvalidArgumentError(
                "the Responses API has no stop sequences", code="unsupported_option", field="stop"
            )
        payload: dict[str, Any] = {
            "model": options.model,
            "input": responses_input(messages),
            "store": False,
            "include": list(DEFAULT_INCLUDE),
        }
        offered = responses_tools(tools) + responses_provider_tools(options.provider_tools)
        if offered:
            payload["tools"] = offered
        # Like Chat Completions, tool_choice and parallel_tool_calls only travel with tools.
        if tools:
            if options.tool_choice is not None:
                payload["tool_choice"] = responses_tool_choice(options.tool_choice, tools)
            if options.parallel_tool_calls is not None:
                payload["parallel_tool_calls"] = options.parallel_tool_calls
        if options.temperature is not None and self.sends("temperature", options):
            payload["temperature"] = options.temperature
        if options.max_tokens is not None:
            payload["max_output_tokens"] = options.max_tokens
        if options.output_schema is not None:
            payload["text"] = {"format": responses_text_format(options.output_schema)}
        payload.update(options.extra)
        return payload

    def parse_response(
        self,
        body: Mapping[str, Any],
        *,
        known_ids: Collection[str] = (),
        tools: Sequence[ToolSpec] = (),
    ) -> CompletionResponse:
        """One Responses body (pure): text, reasoning summaries, calls, finish reason, usage."""
        if body.get("status") == "failed" or (body.get("error") and not body.get("output")):
            raise response_error(self.provider_name, body.get("error"), redact=self._redact)
        texts: list[str] = []
        thoughts: list[str] = []
        reasoning: list[Item] = []
        sequence: list[Item] = []  # reasoning and provider tool items, in their order
        candidates: list[tuple[str | None, str, Any]] = []
        item_ids: dict[str, str] = {}
        for item in _output_items(body):
            match item.get("type"):
                case "message":
                    texts.append(message_text(item))
                case "reasoning":
                    thoughts += reasoning_summaries(item)
                    reasoning.append(copy.deepcopy(dict(item)))
                    sequence.append(reasoning[-1])
                case kind if kind in TOOL_ITEM_KINDS:
                    sequence.append(copy.deepcopy(dict(item)))
                case "function_call":
                    call_id, name, item_id = item.get("call_id"), item.get("name"), item.get("id")
                    if isinstance(call_id, str) and isinstance(item_id, str):
                        item_ids.setdefault(call_id, item_id)
                    candidates.append(
                        (
                            call_id if isinstance(call_id, str) else None,
                            name if isinstance(name, str) else "",
                            item.get("arguments"),
                        )
                    )
                case _:
                    pass  # item types of tools this adapter does not offer
        calls = assign_call_ids(candidates, known_ids=known_ids, provider=self.provider_name)
        namespace: dict[str, Any] = {}
        if reasoning:
            namespace["reasoning"] = reasoning
        if len(sequence) > len(reasoning):
            namespace["items"] = sequence
        # Only calls that kept the API's call id keep its item id (a fresh id is ours).
        kept = {call.id: item_ids[call.id] for call in calls or () if call.id in item_ids}
        if kept:
            namespace["call_items"] = kept
        model = body.get("model")
        return CompletionResponse(
            content="".join(texts),
            model=model if isinstance(model, str) else "",
            usage=responses_usage(body.get("usage")),
            finish_reason="tool_calls" if calls is not None else _finish_reason(body),
            provider=self.provider_name,
            tool_calls=calls,
            thinking=SUMMARY_SEPARATOR.join(thoughts) or None,
            provider_metadata={METADATA_KEY: namespace} if namespace else {},
            provider_tool_calls=tuple(responses_activity(_output_items(body))),
            citations=tuple(responses_citations(_output_items(body))),
        )

    def build_stream_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """:meth:`build_payload` asking for a stream of typed events."""
        payload = self.build_payload(messages, tools, options)
        payload["stream"] = True
        return payload

    def stream_parser(
        self, *, known_ids: Collection[str] = (), tools: Sequence[ToolSpec] = ()
    ) -> ResponsesStreamParser:
        """A parser for one streamed answer; its response is :meth:`parse_response`'s."""
        parse = functools.partial(self.parse_response, known_ids=known_ids, tools=tools)
        return ResponsesStreamParser(
            parse, known_ids=known_ids, redact=self._redact, provider=self.provider_name
        )

    def _url(self, options: CompletionOptions) -> str:
        return f"{self.base_url}/responses"
