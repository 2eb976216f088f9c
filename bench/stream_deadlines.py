"""How long a hostile vendor can hold a streamed request: each adapter against a fake server.

Usage, from the repository root::

    .venv/bin/python bench/stream_deadlines.py [--timeout 3] [--retries 2] [--max-stream 5]

For each adapter's streaming wire (OpenAI-compatible, Anthropic, Gemini,
Ollama) a fake vendor on 127.0.0.1 answers a streamed request in four hostile
ways: keep-alives only, one byte at a time (every 0.2 s), keep-alives after
some text, and text without end. It prints how long the adapter took to give
up, with what error, after how many attempts the server saw, and PASS/MISS
against the bound: ``timeout + 1 s`` per attempt for the first three, and
``max_stream_seconds + 1 s`` for endless text (which keeps the idle bound
alive). Prints numbers; asserts no time (see bench/README.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conversations.domain import ChatMessage
from conversations.exceptions import ProviderError
from conversations.providers.base import CompletionOptions
from tests.fake_provider import WIRES, FakeAnswer, FakeProviderServer, paced

HOLD_SECONDS = 60.0
"""How long the fake vendor would keep a stream going if nobody cut it."""


def hostile(name: str, kind: str) -> FakeAnswer:
    wire = WIRES[name]
    if kind == "keep-alives":
        pieces = paced([wire.start], every=0.1, then=wire.keep_alive, for_seconds=HOLD_SECONDS)
    elif kind == "drip":
        body = b"".join(wire.stream("x" * 1000))
        pieces = paced([body[i : i + 1] for i in range(len(body))], every=0.2)
    elif kind == "text, then keep-alives":
        first = [wire.start, wire.delta("Hello ")]
        pieces = paced(first, every=0.1, then=wire.keep_alive, for_seconds=HOLD_SECONDS)
    else:
        pieces = paced([wire.start], every=0.1, then=wire.delta("more "), for_seconds=HOLD_SECONDS)
    return FakeAnswer(b"", content_type=wire.content_type, pieces=pieces)


def measure(name: str, kind: str, args: argparse.Namespace) -> tuple[float, str, int]:
    answers = [hostile(name, kind) for _ in range(args.retries + 1)]
    with FakeProviderServer(*answers) as server:
        adapter = WIRES[name].connect(
            server,
            timeout=args.timeout,
            max_retries=args.retries,
            max_stream_seconds=args.max_stream,
        )
        started = time.monotonic()
        outcome = "completed"
        try:
            for _event in adapter.stream(
                [ChatMessage.user("Hello")], options=CompletionOptions(model="fake-model")
            ):
                pass
        except ProviderError as exc:
            outcome = exc.code
        finally:
            adapter.close()
        return time.monotonic() - started, outcome, len(server.requests)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=3.0, help="Provider.timeout (s)")
    parser.add_argument("--retries", type=int, default=2, help="Provider.max_retries")
    parser.add_argument("--max-stream", type=float, default=5.0, help="max_stream_seconds")
    args = parser.parse_args()
    kinds = ("keep-alives", "drip", "text, then keep-alives", "endless text")
    print(f"timeout {args.timeout:g} s, {args.retries} retries, max_stream {args.max_stream:g} s")
    print(f"{'adapter':<18} {'stream':<24} {'held (s)':>8}  {'outcome':<18} attempts  bound")
    for name in sorted(WIRES):
        for kind in kinds:
            held, outcome, attempts = measure(name, kind, args)
            limit = args.max_stream if kind == "endless text" else args.timeout
            verdict = "PASS" if held <= (limit + 1) * attempts else "MISS"
            print(f"{name:<18} {kind:<24} {held:8.2f}  {outcome:<18} {attempts:>8}  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
