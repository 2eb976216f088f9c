"""A fake model provider over real HTTP on 127.0.0.1, for tests of faulty providers.

``FakeProviderServer`` is a small threaded ``http.server``: queue the answers
it gives (status, headers, body, and optionally a pause between body bytes
to play a slow provider), point a provider record or adapter at its
``base_url``, and look at the requests it received. Answers beyond the queue
are a 500, so a test that asks too often fails loudly.

A streamed answer is a ``FakeAnswer`` with ``pieces``: an iterable of byte
strings written (and flushed) one by one on a connection that closes at the
end. :func:`paced` spaces them out in time, as a slow or dripping vendor
does; :data:`WIRES` speaks each adapter's streaming wire.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.base import HTTPProvider
from conversations.providers.gemini import GeminiProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import OpenAIProvider
from conversations.providers.openai_responses import OpenAIResponsesProvider

__all__ = ["WIRES", "FakeAnswer", "FakeProviderServer", "Wire", "openai_body", "paced"]


@dataclass(frozen=True)
class FakeAnswer:
    """One answer of the fake server."""

    body: bytes
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    drip_seconds: float = 0.0
    """When set, the body is sent one byte at a time with this pause in between."""
    declare_length: bool = True
    """``False``: no ``content-length``; the body ends when the connection closes."""
    content_type: str = "application/json"
    pieces: Iterable[bytes] | None = None
    """When set, written one by one instead of ``body``; the connection closes after them."""

    @classmethod
    def json(cls, value: Any, *, status: int = 200, **kwargs: Any) -> FakeAnswer:
        # ensure_ascii keeps lone surrogates encodable: they travel as \\ud800 escapes.
        return cls(json.dumps(value).encode(), status=status, **kwargs)


def openai_body(
    content: str | None = "",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    model: str = "fake-model",
    finish_reason: str = "stop",
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Chat Completions answer."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": dict(usage or {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
    }


def openai_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One tool call of a Chat Completions answer (arguments as JSON text)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class FakeProviderServer:
    """A threaded HTTP server answering from a queue; a context manager."""

    def __init__(self, *answers: FakeAnswer) -> None:
        self.answers: deque[FakeAnswer] = deque(answers)
        self.requests: list[dict[str, Any]] = []
        self.bytes_sent = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                with server._lock:
                    server.requests.append({"path": self.path, "body": json.loads(raw or b"{}")})
                    answer = (
                        server.answers.popleft()
                        if server.answers
                        else FakeAnswer(b'{"error": "script exhausted"}', status=500)
                    )
                try:
                    self.send_response(answer.status)
                    self.send_header("content-type", answer.content_type)
                    if answer.pieces is not None:
                        self.send_header("connection", "close")
                        self.close_connection = True
                        self.end_headers()
                        for piece in answer.pieces:
                            self.wfile.write(piece)
                            self.wfile.flush()
                            server.bytes_sent += len(piece)
                        return
                    if answer.declare_length:
                        self.send_header("content-length", str(len(answer.body)))
                    else:
                        self.send_header("connection", "close")
                        self.close_connection = True
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if answer.drip_seconds:
                        for index in range(len(answer.body)):
                            self.wfile.write(answer.body[index : index + 1])
                            self.wfile.flush()
                            server.bytes_sent += 1
                            time.sleep(answer.drip_seconds)
                    else:
                        self.wfile.write(answer.body)
                        server.bytes_sent += len(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    # The client gave up (a deadline, a size limit): expected here.
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeProviderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


# Streams ---------------------------------------------------------------------------


def paced(
    pieces: Iterable[bytes], *, every: float, then: bytes = b"", for_seconds: float = 0.0
) -> Iterator[bytes]:
    """``pieces`` one per ``every`` seconds; then ``then`` at the same pace for ``for_seconds``.

    A sleeping generator on the server's side plays a slow vendor; a test
    never waits on it. ``for_seconds`` bounds a stream that a client does not
    cut, so a test without the client's deadline fails instead of hanging.
    """
    for piece in pieces:
        yield piece
        time.sleep(every)
    ends = time.monotonic() + for_seconds
    while then and time.monotonic() < ends:
        yield then
        time.sleep(every)


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _line(data: Any) -> bytes:
    return json.dumps(data).encode() + b"\n"


@dataclass(frozen=True)
class Wire:
    """How one adapter's vendor streams: the records around the text, keep-alives, a whole body."""

    content_type: str
    start: bytes
    delta: Callable[[str], bytes]
    end: bytes
    keep_alive: bytes
    whole: Callable[[str], dict[str, Any]]
    adapter: type[HTTPProvider]
    """The adapter that speaks it."""
    finish: Callable[[str], bytes] | None = None
    """The end of a stream whose text was this (for a wire whose end repeats the text)."""

    def connect(self, server: FakeProviderServer, **kwargs: Any) -> HTTPProvider:
        """The adapter, pointed at ``server`` (``kwargs``: its settings)."""
        if self.adapter is OpenAIProvider:
            kwargs.setdefault("preset", "openai_compatible")
        return self.adapter(api_key="sk-test", base_url=server.base_url, **kwargs)

    def stream(self, *texts: str) -> list[bytes]:
        """A complete stream of ``texts``, one record each."""
        return [self.start, *(self.delta(text) for text in texts), self.ending("".join(texts))]

    def ending(self, text: str) -> bytes:
        """The records that end a stream whose text was ``text``."""
        return self.finish(text) if self.finish else self.end


_OPENAI_FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
_ANTHROPIC_MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "fake-model"}
_GEMINI_USAGE = {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}
_OLLAMA_DONE = {"done": True, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 2}


def _gemini(text: str, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **({"usageMetadata": _GEMINI_USAGE} if finish else {})}


def _responses(text: str) -> dict[str, Any]:
    """A Responses API ``response`` object answering ``text``."""
    message = {"type": "message", "role": "assistant", "status": "completed"}
    message["content"] = [{"type": "output_text", "text": text, "annotations": []}]
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "fake-model",
        "output": [message],
        "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    }


def _responses_event(kind: str, **fields: Any) -> bytes:
    return _sse({"type": kind, **fields}, kind)


def _ollama(text: str, *, done: bool) -> dict[str, Any]:
    line = {"model": "fake-model", "message": {"role": "assistant", "content": text}}
    return {**line, **(_OLLAMA_DONE if done else {"done": False})}


WIRES: dict[str, Wire] = {
    "openai_compatible": Wire(
        content_type="text/event-stream",
        start=b"",
        delta=lambda text: _sse({"choices": [{"index": 0, "delta": {"content": text}}]}),
        end=_sse(_OPENAI_FINISH) + b"data: [DONE]\n\n",
        keep_alive=b": keep-alive\n\n",
        whole=lambda text: openai_body(text),
        adapter=OpenAIProvider,
    ),
    "anthropic": Wire(
        content_type="text/event-stream",
        start=_sse(
            {"type": "message_start", "message": {**_ANTHROPIC_MESSAGE, "content": []}},
            "message_start",
        )
        + _sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            "content_block_start",
        ),
        delta=lambda text: _sse(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
            "content_block_delta",
        ),
        end=_sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        + _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"input_tokens": 3, "output_tokens": 2},
            },
            "message_delta",
        )
        + _sse({"type": "message_stop"}, "message_stop"),
        keep_alive=_sse({"type": "ping"}, "ping"),
        whole=lambda text: {
            **_ANTHROPIC_MESSAGE,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 2},
        },
        adapter=AnthropicProvider,
    ),
    "gemini": Wire(
        content_type="text/event-stream",
        start=b"",
        delta=lambda text: _sse(_gemini(text)),
        end=_sse(_gemini("", "STOP")),
        keep_alive=b":\n\n",
        whole=lambda text: _gemini(text, "STOP"),
        adapter=GeminiProvider,
    ),
    "openai_responses": Wire(
        content_type="text/event-stream",
        start=_responses_event(
            "response.created", response={**_responses(""), "status": "in_progress", "output": []}
        ),
        delta=lambda text: _responses_event(
            "response.output_text.delta", output_index=0, content_index=0, delta=text
        ),
        end=_responses_event("response.completed", response=_responses("")),
        # The final response repeats the whole text, which the answer is read from.
        finish=lambda text: _responses_event("response.completed", response=_responses(text)),
        keep_alive=b": keep-alive\n\n",
        whole=_responses,
        adapter=OpenAIResponsesProvider,
    ),
    "ollama": Wire(
        content_type="application/x-ndjson",
        start=b"",
        delta=lambda text: _line(_ollama(text, done=False)),
        end=_line(_ollama("", done=True)),
        keep_alive=b"\n",
        whole=lambda text: _ollama(text, done=True),
        adapter=OllamaProvider,
    ),
}
"""Each adapter's streaming wire, by ``Provider.adapter``."""
