"""The offline demo model: deterministic rules instead of a language model.

It lets ``make run`` show the whole tool loop with no network and no key. It
looks at the last user message and asks for the demo tools it recognises
(several requests in one message give parallel calls); once the results are
in, it answers from them. It only calls tools that were offered.

Two additions make it a stand-in for a real model in tests and benchmarks:

- a line ``/call NAME {"json": "arguments"}`` in the user message asks for the
  (offered) tool ``NAME`` with those arguments, so any tool, including your
  own, can be driven through the demo profile; several lines give parallel
  calls, and a line's arguments may be omitted (``{}``);
- a line ``/search QUERY``, for a profile whose provider tools include
  ``web_search``, gives a stand-in web search with two cited example
  sources (see :mod:`.demo_search`);
- ``latency`` (the ``latency_seconds`` option of a demo ``Provider`` record)
  makes every answer wait that long, like a remote model would.

:meth:`DemoProvider.stream` shows the answer word by word and each call's
arguments in a few pieces, pausing ``stream_delay`` seconds before each piece
(built from a record: its ``stream_delay_seconds`` option, else the
``CONVERSATIONS_DEMO_STREAM_DELAY`` environment variable, else the
``DEMO_STREAM_DELAY_SECONDS`` setting, about 30 pieces a second), so the chat
page can be watched streaming offline.

A request asking for its prefix to be cached (``options.cache_key``, which the
loop sets) reports the tokens of the longest prefix an earlier request of
that key sent as cached input, as a provider's prompt cache would: the
ledger shows cache reads from a conversation's second turn on, offline.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    Role,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from conversations.domain.estimates import estimate_tokens

from .base import CompletionOptions, fresh_call_id
from .demo_output import sample_value
from .demo_search import DEMO_SEARCH, search_answer

__all__ = ["DemoProvider"]

_WEATHER = re.compile(
    r"\bweather\b[^?.!]*?\b(?:in|for|at)\s+([A-Za-zÀ-ÿ][A-Za-zÀ-ÿ .'-]*?)"
    r"(?=\s*(?:[,?!.;]|\band\b|\bplease\b|$))",
    re.IGNORECASE,
)
_TIME = re.compile(r"\b(?:time|clock)\b", re.IGNORECASE)
_TIME_ZONE = re.compile(r"\b([A-Z][a-z]+/[A-Z][A-Za-z_]+)\b")
_COMMAND = re.compile(r"^\s*/call\s+([a-zA-Z0-9_-]{1,64})\s*(.*?)\s*$", re.MULTILINE)
_WORDS = re.compile(r"\s*\S+\s*|\s+")
ARGUMENT_PIECES = 3
"""How many pieces a streamed call's arguments are cut into (at most)."""
_ARITHMETIC = re.compile(
    r"(?<![\w.])(\(?\s*-?\d[\d.\s]*(?:[-+*/%^]+\s*\(?\s*-?\d[\d.\s]*\)?\s*)+\)?)"
)

HELP_TEXT = (
    "I am the offline demo model (no real LLM is involved). Ask me about the weather "
    "in a city (for example Leipzig, Berlin, Paris, London, New York or Tokyo), the "
    "current time, or to calculate an expression such as 2 * (3 + 4). Ask for several "
    "at once and I will call the tools in parallel."
)


def _estimate_tokens(text: str) -> int:
    # The demo reports at least one token per message, empty ones included.
    return max(1, estimate_tokens(text))


def _command_arguments(raw: str) -> dict[str, Any]:
    """The JSON object of a ``/call`` line; an empty object when there is none or it is not one."""
    try:
        value: Any = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _summarise(result: str) -> str:
    """A short sentence-friendly rendering of one tool result."""
    try:
        value: Any = json.loads(result)
    except ValueError:
        return result.strip()
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')}: {v}" for k, v in value.items())
    return str(value)


class _PromptCache:
    """The prefixes the demo has been sent, per cache key, as a provider's prompt cache.

    A request marked with ``options.cache_key`` reports as cached the tokens
    of the longest prefix of its messages that an earlier request of the same
    key sent whole (tools and messages equal), and is remembered in turn.
    Bounded: the oldest prefixes are forgotten first.
    """

    def __init__(self, size: int = 1024) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def read(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], key: str | None
    ) -> int:
        if key is None:
            return 0
        digest = hashlib.sha256(key.encode())
        digest.update(json.dumps([spec.to_dict() for spec in tools], sort_keys=True).encode())
        prefixes: list[tuple[str, int]] = []
        tokens = 0
        for message in messages:
            digest.update(message.to_json().encode())
            tokens += _estimate_tokens(message.content)
            prefixes.append((digest.hexdigest(), tokens))
        with self._lock:
            cached = next((n for h, n in reversed(prefixes) if h in self._seen), 0)
            if prefixes:
                self._seen[prefixes[-1][0]] = None
                self._seen.move_to_end(prefixes[-1][0])
                while len(self._seen) > self._size:
                    self._seen.popitem(last=False)
        return cached


_PROMPT_CACHE = _PromptCache()


class DemoProvider:
    """Deterministic, offline stand-in for a model; see the module docstring."""

    provider_name = "demo"
    provider_tool_kinds = frozenset({"web_search"})
    """A stand-in for a provider's web search: see :mod:`.demo_search`."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        stream_delay: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if latency < 0:
            raise ValueError("latency must be >= 0 seconds")
        if stream_delay < 0:
            raise ValueError("stream_delay must be >= 0 seconds")
        self.latency = latency
        self.stream_delay = stream_delay
        """Seconds to pause before each piece of a streamed answer."""
        self._sleep = sleep

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> Iterator[StreamEvent]:
        """The answer of :meth:`complete`, word by word and call by call, then itself."""
        response = self.complete(messages, tools=tools, options=options)
        for delta in _pieces(response):
            if self.stream_delay:
                self._sleep(self.stream_delay)
            yield delta
        yield response

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> CompletionResponse:
        """Ask for tools the last user message wants, or answer from their results."""
        if self.latency:
            time.sleep(self.latency)
        prompt_tokens = sum(_estimate_tokens(m.content) for m in messages)
        cached = _PROMPT_CACHE.read(messages, tools, options.cache_key)
        results = self._trailing_results(messages)
        if results:
            content = self._answer(results)
            return self._response(content, options, prompt_tokens, cached)
        last_user = next((m for m in reversed(messages) if m.role is Role.USER), None)
        searched = DEMO_SEARCH.search(last_user.content if last_user else "")
        if searched and any(tool.kind == "web_search" for tool in options.provider_tools):
            content, activity, citations = search_answer(searched.group(1))
            return dataclasses.replace(
                self._response(content, options, prompt_tokens, cached),
                provider_tool_calls=(activity,),
                citations=citations,
            )
        offered = {spec.name for spec in tools}
        calls = self._plan(last_user.content if last_user else "", offered)
        if calls:
            return CompletionResponse(
                content="",
                model=options.model,
                usage=Usage(prompt_tokens, 8 * len(calls), cached_prompt_tokens=cached),
                finish_reason="tool_calls",
                provider=self.provider_name,
                tool_calls=tuple(calls),
            )
        return self._response(HELP_TEXT, options, prompt_tokens, cached)

    def _response(
        self, content: str, options: CompletionOptions, prompt: int, cached: int = 0
    ) -> CompletionResponse:
        if options.output_schema is not None:
            content = json.dumps(sample_value(options.output_schema.schema), ensure_ascii=False)
        return CompletionResponse(
            content=content,
            model=options.model,
            usage=Usage(prompt, _estimate_tokens(content), cached_prompt_tokens=cached),
            provider=self.provider_name,
        )

    @staticmethod
    def _plan(text: str, offered: set[str]) -> list[ToolCall]:
        commands = _COMMAND.findall(text)
        if commands:
            return [
                ToolCall(id=fresh_call_id(), name=name, arguments=_command_arguments(raw))
                for name, raw in commands
                if name in offered
            ]
        calls: list[ToolCall] = []
        if "get_weather" in offered:
            for match in _WEATHER.finditer(text):
                city = match.group(1).strip()
                calls.append(
                    ToolCall(id=fresh_call_id(), name="get_weather", arguments={"city": city})
                )
        if "get_current_time" in offered and _TIME.search(text):
            zone = _TIME_ZONE.search(text)
            arguments = {"timezone": zone.group(1)} if zone else {}
            calls.append(ToolCall(id=fresh_call_id(), name="get_current_time", arguments=arguments))
        if "calculate" in offered:
            for match in _ARITHMETIC.finditer(text):
                expression = " ".join(match.group(1).split())
                calls.append(
                    ToolCall(
                        id=fresh_call_id(), name="calculate", arguments={"expression": expression}
                    )
                )
        return calls

    @staticmethod
    def _trailing_results(messages: Sequence[ChatMessage]) -> list[tuple[ToolCall, str]]:
        """The calls of the last assistant turn with their results, if that is where we are."""
        results: list[ChatMessage] = []
        for message in reversed(messages):
            if message.role is Role.TOOL:
                results.append(message)
                continue
            if message.role is Role.ASSISTANT and message.tool_calls and results:
                by_id = {m.tool_call_id: m.content for m in results}
                return [(call, by_id.get(call.id, "")) for call in message.tool_calls]
            break
        return []

    @staticmethod
    def _answer(results: list[tuple[ToolCall, str]]) -> str:
        sentences = [_sentence(call, result) for call, result in results]
        return "\n".join(sentences)


def _pieces(response: CompletionResponse) -> Iterator[TextDelta | ToolCallDelta]:
    """The text word by word, then each call: its id and name, then its arguments in pieces."""
    for word in _WORDS.findall(response.content):
        yield TextDelta(word)
    for index, call in enumerate(response.tool_calls or ()):
        text = call.arguments_json
        size = max(1, -(-len(text) // ARGUMENT_PIECES))
        pieces = [text[start : start + size] for start in range(0, len(text), size)]
        yield ToolCallDelta(index, call.id, call.name, pieces[0] if pieces else "")
        for piece in pieces[1:]:
            yield ToolCallDelta(index, arguments=piece)


def _sentence(call: ToolCall, result: str) -> str:
    """One sentence about one result: phrased for the demo tools, generic otherwise."""
    if result.startswith("Error:"):
        return f"I could not use {call.name}: {result[6:].strip()}"
    try:
        value: Any = json.loads(result)
    except ValueError:
        value = result
    if isinstance(value, dict) and "error" in value:
        return f"{call.name} says: {value['error']}"
    if call.name == "get_weather" and isinstance(value, dict) and "temperature_celsius" in value:
        extra = []
        if "humidity_percent" in value:
            extra.append(f"humidity {value['humidity_percent']} %")
        if "wind_kph" in value:
            extra.append(f"wind {value['wind_kph']} km/h")
        tail = f" ({', '.join(extra)})" if extra else ""
        city = value.get("city", call.arguments.get("city", "there"))
        conditions = value.get("conditions", "")
        return f"In {city} it is {value['temperature_celsius']} °C and {conditions}{tail}."
    if call.name == "get_current_time" and isinstance(value, dict) and "datetime" in value:
        stamp = str(value["datetime"])
        clock = stamp[11:16] if len(stamp) >= 16 else stamp
        return (
            f"It is {clock} ({value.get('timezone', 'UTC')}) on "
            f"{value.get('weekday', '')} {stamp[:10]}.".replace(" on  ", " on ")
        )
    if call.name == "calculate":
        return f"{call.arguments.get('expression', '')} = {_summarise(result)}"
    subject = ", ".join(str(v) for v in call.arguments.values())
    label = f"{call.name}({subject})" if subject else call.name
    return f"{label}: {_summarise(result)}"
