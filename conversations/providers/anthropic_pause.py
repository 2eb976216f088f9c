"""Anthropic's paused turns (``stop_reason: "pause_turn"``), asked again until they end, as one answer.

With server tools the API runs a loop of its own, and it may stop a long
turn before the end with ``pause_turn``. The turn goes on when the same
request is sent again with the paused content appended, as received, as the
last assistant message; the next answer holds only what follows, never a
repeat of the paused content. A code execution turn also names
its ``container``, and the next request asks for that container so the
sandbox's files survive the pause.

:class:`PauseTurnContinuation` does this for the adapter, whole and
streamed, at most :data:`MAX_PAUSE_CONTINUATIONS` times per answer, and
merges the bodies of the requests into one before parsing it: their content
blocks in order (text, thinking, server tool calls and results, citations),
their usage counts summed, the last one's stop reason. The answer is thus
one message whose stored content replays the whole turn exactly. A streamed
answer shows the continuation's deltas after the first part's, as one
answer. A turn still paused after the last continuation is kept as it came:
its finish reason is ``length`` (the answer is incomplete), and
``provider_metadata["anthropic"]["pause_turn"]`` says how many continuations
it had and that it was cut off.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Final

from conversations.domain import CompletionResponse, StreamEvent, ToolSpec
from conversations.exceptions import ProviderResponseError

from .anthropic_server_tools import METADATA_KEY
from .anthropic_stream import AnthropicStreamParser
from .base import HTTPProvider
from .boundary import check_response
from .streaming import stream_http

__all__ = [
    "MAX_PAUSE_CONTINUATIONS",
    "PAUSE_TURN",
    "PauseTurnContinuation",
    "continuation_payload",
    "is_paused",
    "merged_body",
]

logger = logging.getLogger("conversations.providers")

PAUSE_TURN: Final = "pause_turn"
"""The stop reason of a turn the API paused."""
MAX_PAUSE_CONTINUATIONS: Final = 5
"""How many times one answer is continued; a turn still paused then is kept as it is."""

Block = dict[str, Any]
Body = Mapping[str, Any]
_NOT_UNDERSTOOD: Final = (KeyError, TypeError, ValueError, IndexError, RecursionError)


# Pure ----------------------------------------------------------------------------------


def is_paused(body: Body) -> bool:
    """Whether ``body`` is a paused turn that can be sent back as it is.

    Its content must be a list of blocks without a client ``tool_use``: a
    call of ours needs its result first, so such a turn is answered as it is.
    """
    content = body.get("content")
    return (
        body.get("stop_reason") == PAUSE_TURN
        and isinstance(content, list)
        and all(isinstance(block, Mapping) for block in content)
        and not any(block.get("type") == "tool_use" for block in content)
    )


def _replayable(blocks: Sequence[Mapping[str, Any]]) -> list[Block]:
    """The paused blocks as the next request carries them.

    They go back as received, except at the very end: the API refuses a final
    assistant message that ends with whitespace (or with an empty text block),
    so a trailing text block loses its trailing whitespace, or goes if blank.
    """
    result = [copy.deepcopy(dict(block)) for block in blocks]
    while result and result[-1].get("type") == "text":
        text = str(result[-1].get("text") or "").rstrip()
        if text:
            result[-1]["text"] = text
            break
        result.pop()
    return result


def _container(body: Body) -> str | None:
    container = body.get("container")
    found = container.get("id") if isinstance(container, Mapping) else None
    return found if isinstance(found, str) and found else None


def continuation_payload(payload: Mapping[str, Any], paused: Sequence[Body]) -> dict[str, Any]:
    """The request that continues ``paused`` (every body received so far, all paused).

    It is ``payload`` (the first request) with the paused blocks, in order,
    as its last assistant message: appended to the messages, or to the
    assistant message already last (a prefill, which the answer continues).
    The last paused body's container is asked for unless ``payload`` names one.
    """
    body = copy.deepcopy(dict(payload))
    messages: list[dict[str, Any]] = body["messages"]
    blocks = _replayable([block for answer in paused for block in answer["content"]])
    if blocks:
        last = messages[-1]
        if last["role"] == "assistant":
            content = last["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            last["content"] = [*content, *blocks]
        else:
            messages.append({"role": "assistant", "content": blocks})
    container = _container(paused[-1])
    if container is not None and "container" not in body:
        body["container"] = container
    return body


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _added(total: Any, value: Any) -> Any:
    """Two usage values summed: counts added, objects key by key, anything else the later one."""
    if value is None:
        return total
    if _is_count(total) and _is_count(value):
        return total + value
    if isinstance(total, Mapping) and isinstance(value, Mapping):
        summed = dict(total)
        for key, item in value.items():
            summed[key] = _added(summed[key], item) if key in summed else copy.deepcopy(item)
        return summed
    return copy.deepcopy(value)  # what parsing refuses stays visible to it


def merged_body(bodies: Sequence[Body]) -> dict[str, Any]:
    """One Messages body for a turn answered in ``bodies`` (all but the last paused).

    The last body's fields, every body's content blocks in order and the
    usage of all of them summed (``server_tool_use`` counts included).
    """
    merged = copy.deepcopy(dict(bodies[-1]))
    last = merged.get("content")
    if isinstance(last, list):
        merged["content"] = [
            copy.deepcopy(block) for body in bodies[:-1] for block in body["content"]
        ] + last
    usage: Any = None
    for body in bodies:
        usage = _added(usage, body.get("usage"))
    if usage is not None:
        merged["usage"] = usage
    return merged


# The adapter's side ------------------------------------------------------------------


def _recording(
    parse: Callable[[Body], CompletionResponse], received: list[Body]
) -> Callable[[Body], CompletionResponse]:
    """``parse``, keeping each body it is given in ``received``."""

    def parse_and_keep(body: Body) -> CompletionResponse:
        received.append(body)
        return parse(body)

    return parse_and_keep


class PauseTurnContinuation(HTTPProvider):
    """The Anthropic adapter's exchange: whole or streamed, a paused turn continued."""

    def stream_parser(
        self, *, known_ids: Collection[str] = (), tools: Sequence[ToolSpec] = ()
    ) -> AnthropicStreamParser:
        """A parser for one streamed answer; its response is :meth:`parse_response`'s."""
        parse = functools.partial(self.parse_response, known_ids=known_ids, tools=tools)
        return self._parser(parse, known_ids)

    def _parser(
        self, parse: Callable[[Body], CompletionResponse], known_ids: Collection[str]
    ) -> AnthropicStreamParser:
        return AnthropicStreamParser(
            parse, known_ids=known_ids, redact=self._redact, provider=self.provider_name
        )

    def _answer(
        self, url: str, payload: dict[str, Any], known: Collection[str], tools: Sequence[ToolSpec]
    ) -> CompletionResponse:
        """Send the body, and again while the turn pauses; the answer of all of them."""
        bodies = [self._post(url, payload)]
        while self._continues(bodies):
            bodies.append(self._post(url, continuation_payload(payload, bodies)))
        return check_response(self._merged(bodies, known, tools), provider=self.provider_name)

    def _streamed(
        self, url: str, payload: dict[str, Any], known: Collection[str], tools: Sequence[ToolSpec]
    ) -> Iterator[StreamEvent]:
        """Like :meth:`_answer`, streamed: each request's deltas in turn, then the one answer."""
        parse = functools.partial(self.parse_response, known_ids=known, tools=tools)
        bodies: list[Body] = []
        parts: list[CompletionResponse] = []
        request = payload
        while True:
            received: list[Body] = []
            recorded = _recording(parse, received)
            for event in stream_http(
                self,
                url=url,
                payload=request,
                parser=functools.partial(self._parser, recorded, known),
                wire=self.stream_format,
                whole=recorded,
            ):
                # A part's response is not the answer (unless it is the only part).
                if isinstance(event, CompletionResponse):
                    parts.append(event)
                else:
                    yield event
            bodies.append(received[-1])
            if not self._continues(bodies):
                break
            request = continuation_payload(payload, bodies)
        if len(parts) == 1:
            yield parts[0]
            return
        # Only the last part can hold calls (a paused one never does): keep the
        # ids its deltas showed, even those minted for calls that came without one.
        answer = dataclasses.replace(
            self._merged(bodies, known, tools), tool_calls=parts[-1].tool_calls
        )
        yield check_response(answer, provider=self.provider_name)

    def _continues(self, bodies: Sequence[Body]) -> bool:
        """Whether the turn paused and may be continued once more."""
        if not is_paused(bodies[-1]):
            return False
        if len(bodies) > MAX_PAUSE_CONTINUATIONS:
            logger.warning(
                "%s: the turn paused again after %d continuations; kept as it is",
                self.provider_name,
                MAX_PAUSE_CONTINUATIONS,
            )
            return False
        logger.info("%s: the turn paused; continuing it (%d)", self.provider_name, len(bodies))
        return True

    def _merged(
        self, bodies: Sequence[Body], known: Collection[str], tools: Sequence[ToolSpec]
    ) -> CompletionResponse:
        """The one response of the bodies a turn was answered in."""
        try:
            if len(bodies) == 1:
                return self.parse_response(bodies[0], known_ids=known, tools=tools)
            response = self.parse_response(merged_body(bodies), known_ids=known, tools=tools)
        except _NOT_UNDERSTOOD as exc:
            raise ProviderResponseError(
                f"{self.provider_name}: could not understand the response ({type(exc).__name__})"
            ) from None
        namespace = dict(response.provider_metadata.get(METADATA_KEY) or {})
        namespace["pause_turn"] = {
            "continuations": len(bodies) - 1,
            "cut_off": is_paused(bodies[-1]),
        }
        metadata = {**response.provider_metadata, METADATA_KEY: namespace}
        return dataclasses.replace(response, provider_metadata=metadata)
