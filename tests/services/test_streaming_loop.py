"""The tool loop streaming answers: live deltas and snapshots, the same stored record, cancelling."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext

from conversations import events
from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from conversations.exceptions import ProviderResponseError
from conversations.models import Message, ModelCall, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.base import ChatProvider
from conversations.providers.openai import OpenAIProvider
from conversations.providers.options import CompletionOptions
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import history_for_provider
from conversations.services import cancel_run
from conversations.services.loop.live import CANCELLED_FINISH_REASON, LiveRun
from conversations.services.loop.runs import start_run
from conversations.services.loop.tool_loop import execute_run
from conversations.services.transcript.messages import create_conversation
from conversations.tools import registry, tool
from tests.providers.mock_http import Recorder, streamed

pytestmark = pytest.mark.django_db

USAGE_CALLS = Usage(prompt_tokens=11, completion_tokens=7, reasoning_tokens=2)
USAGE_TEXT = Usage(prompt_tokens=30, completion_tokens=5, cached_prompt_tokens=4)


@pytest.fixture
def calls_made():
    return []


@pytest.fixture
def tools(calls_made):
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            calls_made.append(("add", a, b))
            return a + b

        yield r


class ChunkedProvider:
    """Streams each scripted answer in the given pieces, then the answer itself.

    ``pause`` seconds pass before each piece after the first ``burst`` ones;
    ``silent_after`` pieces in, the stream waits (a silent provider) until
    ``release`` is set. Records how many pieces it yielded and whether its
    stream was closed before the end.
    """

    provider_name = "chunked"

    def __init__(
        self,
        script: Sequence[tuple[Sequence[StreamEvent], CompletionResponse]],
        *,
        pause: float = 0.0,
        burst: int = 0,
        silent_after: int | None = None,
        on_request: Any = None,
    ) -> None:
        self.script = list(script)
        self.pause, self.burst, self.silent_after = pause, burst, silent_after
        self.on_request = on_request
        self.release = threading.Event()
        self.closed = threading.Event()
        self.yielded = 0
        self.requests = 0
        self.snapshots: list[dict[str, Any] | None] = []
        self.run_id: Any = None

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> CompletionResponse:
        self.requests += 1
        return self.script.pop(0)[1]

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> Iterator[StreamEvent]:
        self.requests += 1
        if self.on_request is not None:
            self.on_request()
        pieces, response = self.script.pop(0)
        return self._pieces(pieces, response)

    def _pieces(
        self, pieces: Sequence[StreamEvent], response: CompletionResponse
    ) -> Iterator[StreamEvent]:
        try:
            for number, piece in enumerate(pieces):
                if number == self.silent_after:
                    self.release.wait(30)
                if number >= self.burst and self.pause:
                    time.sleep(self.pause)
                self.yielded += 1
                yield piece
                if self.run_id is not None:
                    self.snapshots.append(self._snapshot_after(self.yielded))
            yield response
        except GeneratorExit:
            self.closed.set()
            raise

    def _snapshot_after(self, seq: int) -> dict[str, Any] | None:
        """The in-flight snapshot once the loop has relayed piece number ``seq`` of the run."""
        for _ in range(1000):
            snapshot = events.inflight(self.run_id)
            if snapshot is not None and snapshot["seq"] >= seq:
                return snapshot
            time.sleep(0.01)
        return None


def _answers() -> list[tuple[list[StreamEvent], CompletionResponse]]:
    """Two rounds: text and a call whose arguments arrive in pieces, then the final text."""
    call = ToolCall(id="call_1", name="add", arguments={"a": 1, "b": 2})
    first = scripted_calls(call, content="Let me add.", usage=USAGE_CALLS, model="m-1")
    second = scripted_text("It is 3.", usage=USAGE_TEXT, model="m-1")
    return [
        (
            [
                ReasoningDelta("adding "),
                TextDelta("Let "),
                TextDelta("me add."),
                ToolCallDelta(0, "call_1", "add", '{"a": 1'),
                ToolCallDelta(0, None, None, ', "b": 2}'),
            ],
            first,
        ),
        ([TextDelta("It "), TextDelta("is "), TextDelta("3.")], second),
    ]


def _start(user, profile, provider, *, content: str = "1+2?") -> Run:
    conversation = create_conversation(owner=user, profile=profile)
    return start_run(conversation=conversation, content=content, profile=profile, provider=provider)


def _run(user, profile, provider) -> Run:
    return execute_run(run=_start(user, profile, provider), provider=provider)


_VOLATILE = {"id", "pk", "run", "root_run", "conversation", "message", "tool_call", "created_at"}


def _record(run: Run) -> dict[str, Any]:
    """Everything a run stored, without ids, timestamps and timings."""
    run.refresh_from_db()
    messages = []
    for message in Message.objects.filter(run=run).order_by("position"):
        row = model_to_dict(message, exclude=[*_VOLATILE, "latency_ms", "search_vector"])
        row["answers"] = message.tool_call.call_id if message.tool_call else None
        row["calls"] = [
            model_to_dict(call, exclude=[*_VOLATILE, "started_at", "finished_at"])
            for call in ToolCallRow.objects.filter(message=message).order_by("index")
        ]
        messages.append(row)
    model_calls = [
        model_to_dict(
            call,
            exclude=[
                *_VOLATILE,
                "started_at",
                "recorded_at",
                "latency_ms",
                "time_to_first_token_ms",
            ],
        )
        for call in ModelCall.objects.filter(run=run).order_by("started_at", "pk")
    ]
    counters = model_to_dict(
        run,
        exclude=[
            *_VOLATILE,
            "started_at",
            "finished_at",
            "claimed_at",
            "heartbeat_at",
            "worker",
            "user_message",
        ],
    )
    return {"messages": messages, "model_calls": model_calls, "run": counters}


def test_a_streamed_run_stores_exactly_what_a_whole_one_stores(user, profile, tools, calls_made):
    model = profile.language_model
    model.input_price_per_million, model.output_price_per_million = Decimal(2), Decimal(8)
    model.save()
    streamed = _run(user, profile, ChunkedProvider(_answers()))
    profile.stream = False
    profile.save()
    whole_provider = ChunkedProvider(_answers())
    whole = _run(user, profile, whole_provider)

    assert streamed.status == whole.status == Run.Status.COMPLETED
    assert _record(streamed) == _record(whole)
    assert calls_made == [("add", 1, 2), ("add", 1, 2)]
    # Only the streamed answers know when their first piece came.
    assert all(
        c.time_to_first_token_ms is not None and c.time_to_first_token_ms <= c.latency_ms
        for c in ModelCall.objects.filter(run=streamed)
    )
    assert not ModelCall.objects.filter(run=whole, time_to_first_token_ms__isnull=False).exists()
    assert whole_provider.requests == 2 and whole_provider.yielded == 0


def test_each_answers_last_seq_is_recorded_before_its_turn_is_stored(user, profile, tools):
    seen: list[tuple[int, list[int]]] = []

    def at_each_request():
        # What a watcher reading the rows now would read: the figure, then the turns.
        stored = Message.objects.filter(run=provider.run_id, role=Message.Role.ASSISTANT)
        seen.append((events.streamed_seq(provider.run_id), [m.position for m in stored]))

    provider = ChunkedProvider(_answers(), on_request=at_each_request)
    run = _start(user, profile, provider)
    provider.run_id = run.pk
    execute_run(run=run, provider=provider)

    # The first answer streamed deltas 1 to 5 and is stored before the second request.
    assert seen[0] == (0, [])
    assert seen[1][0] == 5 and len(seen[1][1]) == 1
    assert events.streamed_seq(run.pk) == 8


def test_deltas_are_published_in_order_and_the_snapshot_follows_them(user, profile, tools):
    provider = ChunkedProvider(_answers())
    run = _start(user, profile, provider)
    provider.run_id = run.pk
    with events.subscribe(run.pk) as subscription:
        execute_run(run=run, provider=provider)
        received = []
        while (event := subscription.get(0)) is not None:
            received.append(event)

    deltas = [e for e in received if e.type in events.DELTA_TYPES]
    assert [e.data["seq"] for e in deltas] == list(range(1, 9))
    assert [(e.type, e.data) for e in deltas[:5]] == [
        ("reasoning.delta", {"seq": 1, "text": "adding "}),
        ("text.delta", {"seq": 2, "text": "Let "}),
        ("text.delta", {"seq": 3, "text": "me add."}),
        (
            "tool_call.delta",
            {"seq": 4, "index": 0, "id": "call_1", "name": "add", "arguments": '{"a": 1'},
        ),
        (
            "tool_call.delta",
            {"seq": 5, "index": 0, "id": None, "name": None, "arguments": ', "b": 2}'},
        ),
    ]
    assert "".join(e.data["text"] for e in deltas[5:]) == "It is 3."
    # While streaming, the snapshot holds everything relayed so far of the current answer.
    first_answer = provider.snapshots[:5]
    assert [s["seq"] for s in provider.snapshots] == list(range(1, 9))
    assert [s["text"] for s in first_answer] == [
        "",
        "Let ",
        "Let me add.",
        "Let me add.",
        "Let me add.",
    ]
    assert first_answer[-1]["reasoning"] == "adding "
    assert first_answer[-1]["tool_calls"] == [
        {"index": 0, "id": "call_1", "name": "add", "arguments": '{"a": 1, "b": 2}'}
    ]
    assert [s["text"] for s in provider.snapshots[5:]] == ["It ", "It is ", "It is 3."]
    assert events.inflight(run.pk) is None


@pytest.mark.django_db(transaction=True)
def test_watchers_are_told_after_each_commit(user, profile, tools):
    provider = ChunkedProvider(_answers())
    run = _start(user, profile, provider)
    with events.subscribe(run.pk) as subscription:
        execute_run(run=run, provider=provider)
        kinds = []
        while (event := subscription.get(0)) is not None:
            kinds.append("delta" if event.type in events.DELTA_TYPES else event.type)
    # The first turn stored (its call marked running), its result stored, the answer
    # stored, the run finished.
    assert kinds == ["delta"] * 5 + ["changed", "changed"] + ["delta"] * 3 + ["changed"] * 2


def test_no_row_is_written_per_delta(user, profile, tools):
    def script(pieces: int):
        text = "x" * pieces
        return [([TextDelta("x") for _ in range(pieces)], scripted_text(text))]

    counts = []
    for pieces in (2, 60):
        provider = ChunkedProvider(script(pieces))
        with CaptureQueriesContext(connection) as context:
            run = _run(user, profile, provider)
        assert run.status == Run.Status.COMPLETED and run.final_content == "x" * pieces
        # The cancellation check depends on time, not on deltas: left out.
        counts.append(sum("cancel_requested" not in q["sql"] for q in context.captured_queries))
    assert counts[0] == counts[1]


def test_cancelling_while_the_provider_is_silent_keeps_the_text_so_far(
    user, profile, tools, calls_made
):
    pieces: list[StreamEvent] = [
        TextDelta("Let me "),
        TextDelta("think"),
        ToolCallDelta(0, "call_9", "add", '{"a": '),
        ToolCallDelta(0, None, None, "1}"),
        TextDelta("never shown"),
    ]
    answer = scripted_calls(ToolCall(id="call_9", name="add", arguments={"a": 1}))
    holder: dict[str, Run] = {}
    provider = ChunkedProvider(
        [(pieces, answer)],
        silent_after=3,
        # The request to stop arrives as the model starts answering.
        on_request=lambda: cancel_run(run=Run.objects.get(pk=holder["run"].pk)),
    )
    run = holder["run"] = _start(user, profile, provider)
    conversation = run.conversation
    with events.subscribe(run.pk) as subscription:
        ended = execute_run(run=run, provider=provider)
        shown = []
        while (event := subscription.get(0)) is not None:
            shown.append(event)
    # The loop stopped while the provider said nothing; once the provider speaks
    # again its stream is closed: nothing after the pause was taken.
    provider.release.set()
    assert provider.closed.wait(10)
    assert provider.yielded == 4 < len(pieces)

    assert ended.status == Run.Status.CANCELLED and ended.error_code == "run_cancelled"
    assistant = Message.objects.get(run=run, role="assistant")
    text = "".join(e.data["text"] for e in shown if e.type == "text.delta")
    assert assistant.content == text == "Let me think"
    assert assistant.finish_reason == CANCELLED_FINISH_REASON
    assert not ToolCallRow.objects.filter(message__conversation=conversation).exists()
    assert calls_made == []
    (call,) = ModelCall.objects.filter(run=run)
    assert call.message_id == assistant.pk and call.status == ModelCall.Status.OK
    # The provider never said what it used: the ledger charges an estimate, marked so.
    assert call.estimated and call.prompt_tokens > 0 and call.completion_tokens > 0
    assert assistant.usage_estimated and assistant.completion_tokens == call.completion_tokens
    assert events.inflight(run.pk) is None
    # The stored history is one a provider can be sent.
    roles = [m.role for m in history_for_provider(conversation=conversation, profile=profile)]
    assert roles[-2:] == ["user", "assistant"]


def test_a_cancel_before_any_text_stores_no_message(user, profile, tools, calls_made):
    pieces: list[StreamEvent] = [ReasoningDelta("hmm"), ToolCallDelta(0, "call_1", "add", "{")]
    holder: dict[str, Run] = {}
    provider = ChunkedProvider(
        [([*pieces, TextDelta("late")], scripted_text("late"))],
        silent_after=2,
        on_request=lambda: cancel_run(run=Run.objects.get(pk=holder["run"].pk)),
    )
    run = holder["run"] = _start(user, profile, provider)
    ended = execute_run(run=run, provider=provider)
    provider.release.set()
    assert provider.closed.wait(10)

    assert ended.status == Run.Status.CANCELLED
    assert not Message.objects.filter(run=run, role="assistant").exists()
    (call,) = ModelCall.objects.filter(run=run)
    assert call.status == ModelCall.Status.ERROR and call.error_code == "run_cancelled"
    assert call.message_id is None
    assert calls_made == [] and events.inflight(run.pk) is None


def test_a_provider_error_mid_stream_fails_the_run_and_stores_nothing_partial(user, profile, tools):
    class Breaking(ChunkedProvider):
        def _pieces(self, pieces, response):
            yield TextDelta("Half an ans")
            raise ProviderResponseError("chunked: the stream broke off")

    provider = Breaking([([], scripted_text("unused"))])
    run = _run(user, profile, provider)
    assert run.status == Run.Status.FAILED and run.error_code == "provider_bad_response"
    assert not Message.objects.filter(run=run, role="assistant").exists()
    (call,) = ModelCall.objects.filter(run=run)
    assert call.error_code == "provider_bad_response"
    assert events.inflight(run.pk) is None


def test_a_stream_that_ends_without_its_answer_fails_the_run(user, profile, tools):
    class Truncated(ChunkedProvider):
        def _pieces(self, pieces, response):
            yield TextDelta("Half")

    run = _run(user, profile, Truncated([([], scripted_text("unused"))]))
    assert run.status == Run.Status.FAILED and run.error_code == "provider_bad_response"
    assert not Message.objects.filter(run=run, role="assistant").exists()


class WholeOnly:
    """Answers whole: no stream() at all."""

    provider_name = "whole"

    def __init__(self) -> None:
        self.scripted = ScriptedProvider([scripted_text("All at once.")])

    def complete(self, messages, *, tools=(), options):
        return self.scripted.complete(messages, tools=tools, options=options)


class StubStream(WholeOnly, ChatProvider):
    """Names the protocol as its base, so it inherits its stream() stub."""


class HooksMissing(WholeOnly):
    """Like an HTTP adapter whose streaming hooks are not written."""

    def stream(self, messages, *, tools=(), options):
        raise NotImplementedError


@pytest.mark.parametrize("kind", [WholeOnly, StubStream, HooksMissing])
def test_a_provider_that_cannot_stream_answers_whole_with_streaming_on(user, profile, tools, kind):
    assert profile.stream
    provider = kind()
    run = _start(user, profile, provider)
    with events.subscribe(run.pk) as subscription:
        ended = execute_run(run=run, provider=provider)
        shown = subscription.get(0)
    assert ended.status == Run.Status.COMPLETED and ended.final_content == "All at once."
    # Relayed as one piece; not a streamed answer, so no time to a first token.
    assert shown is not None and shown.data == {"seq": 1, "text": "All at once."}
    (call,) = ModelCall.objects.filter(run=run)
    assert call.time_to_first_token_ms is None


def test_the_scripted_provider_streams_through_the_loop(user, profile, tools, calls_made):
    provider = ScriptedProvider([scripted_calls(("add", {"a": 2, "b": 3})), scripted_text("5")])
    run = _run(user, profile, provider)
    assert run.status == Run.Status.COMPLETED and run.final_content == "5"
    assert calls_made == [("add", 2, 3)]


def test_seq_goes_on_where_the_runs_last_answer_stopped(user, profile, tools):
    run = _run(user, profile, ChunkedProvider(_answers()))
    assert LiveRun(run.pk, stream=True).seq == 8


def test_an_http_adapter_streams_through_the_loop(user, profile, tools):
    def record(*chunks: dict[str, Any]) -> bytes:
        lines = [json.dumps(chunk) for chunk in chunks] + ["[DONE]"]
        return "".join(f"data: {line}\n\n" for line in lines).encode()

    def piece(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    body = record(piece({"content": "Hel"}), piece({"content": "lo"}), piece({}, "stop"))
    recorder = Recorder(streamed([body[:7], body[7:40], body[40:]]), strict=True)
    provider = OpenAIProvider(
        api_key="k", base_url="https://llm.example.test/v1", http_client=recorder.client
    )
    run = _start(user, profile, provider)
    with events.subscribe(run.pk) as subscription:
        ended = execute_run(run=run, provider=provider)
        shown = [e.data["text"] for e in iter(lambda: subscription.get(0), None)]
    assert json.loads(recorder.requests[0].content)["stream"] is True
    assert ended.status == Run.Status.COMPLETED and ended.final_content == "Hello"
    assert shown == ["Hel", "lo"]
    (call,) = ModelCall.objects.filter(run=run)
    assert call.time_to_first_token_ms is not None
