"""A fake model provider over real HTTP on 127.0.0.1, for tests of faulty providers.

``FakeProviderServer`` is a small threaded ``http.server``: queue the answers
it gives (status, headers, body, and optionally a pause between body bytes
to play a slow provider), point a provider record or adapter at its
``base_url``, and look at the requests it received. Answers beyond the queue
are a 500, so a test that asks too often fails loudly.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeAnswer", "FakeProviderServer", "openai_body"]


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
                    self.send_header("content-type", "application/json")
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
