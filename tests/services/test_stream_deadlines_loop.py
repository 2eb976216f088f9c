"""Runs whose answers stream from a fake vendor over real HTTP: deadlines, whole answers, estimates.

A stream cut by a deadline fails the run with ``provider_timeout`` and keeps
what it showed as a turn without calls; a vendor answering with whole JSON is
understood; a call that ended without the vendor's usage is charged an
estimate, marked as such, that budgets see.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from conversations import events
from conversations.domain import ChatMessage, StreamEvent, ToolSpec
from conversations.models import (
    Budget,
    BudgetCounter,
    LanguageModel,
    Message,
    ModelCall,
    Profile,
    Provider,
    Run,
)
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.options import CompletionOptions
from conversations.selectors import get_history
from conversations.services import cancel_run, run_tool_loop
from conversations.services.configuration.providers import build_provider
from conversations.services.loop.live import CANCELLED_FINISH_REASON, TIMEOUT_FINISH_REASON
from conversations.services.loop.runs import start_run
from conversations.services.loop.tool_loop import execute_run
from conversations.services.transcript.messages import create_conversation
from tests.fake_provider import WIRES, FakeAnswer, FakeProviderServer, paced

pytestmark = pytest.mark.django_db

KEY_VARIABLE = "STREAM_DEADLINE_TEST_KEY"
DEADLINE = 2.0
"""A bound the text sent before it must beat: ample for a machine under load.

Until the first delta, the idle bound counts from the request, so a bound
of half a second failed these tests when a loaded machine took that long to
run the fake vendor's thread; two seconds costs each test its wait only."""
ADAPTERS = sorted(WIRES)


@pytest.fixture
def streaming_profile(monkeypatch):
    def make(server: FakeProviderServer, adapter: str, **provider_fields: Any) -> Profile:
        monkeypatch.setenv(KEY_VARIABLE, "sk-test-secret")
        provider_fields.setdefault("max_retries", 2)
        provider = Provider.objects.create(
            slug=f"fake-{adapter}".replace("_", "-"),
            name="Fake",
            adapter=adapter,
            base_url=server.base_url,
            api_key_ref=f"env:{KEY_VARIABLE}",
            **provider_fields,
        )
        model = LanguageModel.objects.create(provider=provider, model_id="fake-model")
        return Profile.objects.create(
            slug=provider.slug, name="Fake", language_model=model, stream=True
        )

    return make


def keep_alives_after(adapter: str, *records: bytes) -> FakeAnswer:
    """``records``, then keep-alives for ten seconds (bounded: a test without deadlines fails)."""
    wire = WIRES[adapter]
    pieces = paced([wire.start, *records], every=0.05, then=wire.keep_alive, for_seconds=10)
    return FakeAnswer(b"", content_type=wire.content_type, pieces=pieces)


def whole_stream(adapter: str, *texts: str) -> FakeAnswer:
    wire = WIRES[adapter]
    return FakeAnswer(b"".join(wire.stream(*texts)), content_type=wire.content_type)


def assert_the_record_takes_another_turn(conversation, profile, server) -> None:
    """The stored history is one a provider accepts: the next turn runs on it and completes."""
    adapter = profile.language_model.provider.adapter
    server.answers.append(whole_stream(adapter, "Next answer."))
    following = run_tool_loop(conversation=conversation, content="And now?", profile=profile)
    assert following.status == Run.Status.COMPLETED and following.final_content == "Next answer."
    roles = [message.role for message in get_history(conversation=conversation)]
    assert roles[-2:] == ["user", "assistant"]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_keep_alives_after_some_text_fail_the_run_and_keep_the_text(
    user, streaming_profile, adapter
):
    wire = WIRES[adapter]
    with FakeProviderServer(keep_alives_after(adapter, wire.delta("Partly "))) as server:
        profile = streaming_profile(server, adapter, timeout=DEADLINE)
        conversation = create_conversation(owner=user, profile=profile)
        run = run_tool_loop(conversation=conversation, content="Go", profile=profile)

        assert run.status == Run.Status.FAILED and run.error_code == "provider_timeout"
        assert len(server.requests) == 1
        kept = Message.objects.get(run=run, role="assistant")
        assert kept.content == "Partly " and kept.finish_reason == TIMEOUT_FINISH_REASON
        (call,) = ModelCall.objects.filter(run=run)
        assert call.message_id == kept.pk and call.estimated
        assert call.prompt_tokens > 0 and call.completion_tokens > 0
        assert_the_record_takes_another_turn(conversation, profile, server)


def test_a_call_fragment_cut_by_the_deadline_is_dropped_never_stored(user, streaming_profile):
    piece = {"index": 0, "id": "call_1", "function": {"name": "add", "arguments": '{"a": '}}
    fragment = WIRES["openai_compatible"].delta("Adding ")
    call_start = (
        b'data: {"choices": [{"index": 0, "delta": {"tool_calls": ['
        + json.dumps(piece).encode()
        + b"]}}]}\n\n"
    )
    answer = keep_alives_after("openai_compatible", fragment, call_start)
    with FakeProviderServer(answer) as server:
        profile = streaming_profile(server, "openai_compatible", timeout=DEADLINE)
        conversation = create_conversation(owner=user, profile=profile)
        run = run_tool_loop(conversation=conversation, content="1+2?", profile=profile)

        assert run.status == Run.Status.FAILED and run.error_code == "provider_timeout"
        assert Message.objects.get(run=run, role="assistant").content == "Adding "
        assert not ToolCallRow.objects.filter(message__conversation=conversation).exists()
        assert_the_record_takes_another_turn(conversation, profile, server)


def test_a_dripping_stream_fails_the_run_after_one_attempt(user, streaming_profile):
    wire = WIRES["openai_compatible"]
    body = b"".join(wire.stream("x" * 100))
    answer = FakeAnswer(
        body, content_type=wire.content_type, drip_seconds=0.05, declare_length=False
    )
    with FakeProviderServer(answer) as server:
        profile = streaming_profile(server, "openai_compatible", timeout=0.5)
        conversation = create_conversation(owner=user, profile=profile)
        run = run_tool_loop(conversation=conversation, content="Go", profile=profile)

        assert run.status == Run.Status.FAILED and run.error_code == "provider_timeout"
        assert len(server.requests) == 1
        assert not Message.objects.filter(run=run, role="assistant").exists()
        (call,) = ModelCall.objects.filter(run=run)
        assert call.status == ModelCall.Status.ERROR and call.error_code == "provider_timeout"
        # The vendor read the request: its part is charged, as an estimate.
        assert call.estimated and call.prompt_tokens > 0
        assert_the_record_takes_another_turn(conversation, profile, server)


def test_a_stream_past_max_stream_seconds_fails_the_run_and_keeps_the_text(user, streaming_profile):
    wire = WIRES["anthropic"]
    pieces = paced([wire.start], every=0.05, then=wire.delta("more "), for_seconds=10)
    answer = FakeAnswer(b"", content_type=wire.content_type, pieces=pieces)
    with FakeProviderServer(answer) as server:
        profile = streaming_profile(server, "anthropic", timeout=5, max_stream_seconds=DEADLINE)
        conversation = create_conversation(owner=user, profile=profile)
        run = run_tool_loop(conversation=conversation, content="Go", profile=profile)

        assert run.status == Run.Status.FAILED and run.error_code == "provider_timeout"
        kept = Message.objects.get(run=run, role="assistant")
        assert kept.content.startswith("more ") and kept.finish_reason == TIMEOUT_FINISH_REASON
        assert kept.usage_estimated
        run.refresh_from_db()
        assert run.estimated_calls == 1 and run.completion_tokens > 0
        assert_the_record_takes_another_turn(conversation, profile, server)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_whole_json_answer_to_a_streamed_request_is_stored_and_shown_as_one_delta(
    user, streaming_profile, adapter
):
    with FakeProviderServer(FakeAnswer.json(WIRES[adapter].whole("All at once."))) as server:
        profile = streaming_profile(server, adapter, timeout=5)
        conversation = create_conversation(owner=user, profile=profile)
        run = start_run(conversation=conversation, content="Go", profile=profile)
        with events.subscribe(run.pk) as subscription:
            ended = execute_run(run=run)
            shown = []
            while (event := subscription.get(0)) is not None:
                shown.append(event)

    assert ended.status == Run.Status.COMPLETED and ended.final_content == "All at once."
    assert [e.data["text"] for e in shown if e.type == "text.delta"] == ["All at once."]
    stored = Message.objects.get(run=run, role="assistant")
    assert stored.content == "All at once." and stored.prompt_tokens == 3
    assert not stored.usage_estimated
    assert not ModelCall.objects.get(run=run).estimated


def test_a_stream_that_breaks_off_is_charged_an_estimate(user, streaming_profile):
    wire = WIRES["openai_compatible"]
    # Text, then the connection closes without a finish: the answer broke off.
    answer = FakeAnswer(
        b"", content_type=wire.content_type, pieces=[wire.delta("Half of it " * 20)]
    )
    with FakeProviderServer(answer) as server:
        profile = streaming_profile(server, "openai_compatible", timeout=5)
        conversation = create_conversation(owner=user, profile=profile)
        run = run_tool_loop(conversation=conversation, content="Go", profile=profile)

        assert run.status == Run.Status.FAILED and run.error_code == "provider_bad_response"
        assert not Message.objects.filter(run=run, role="assistant").exists()
        (call,) = ModelCall.objects.filter(run=run)
        assert call.status == ModelCall.Status.ERROR and call.estimated
        assert call.completion_tokens >= 50  # 220 characters came before the break
        run.refresh_from_db()
        assert run.estimated_calls == 1 and run.total_tokens > call.completion_tokens
        assert_the_record_takes_another_turn(conversation, profile, server)


def test_a_request_refused_before_it_began_is_not_charged(user, streaming_profile):
    answer = FakeAnswer(b'{"error": {"message": "no such model"}}', status=404)
    with FakeProviderServer(answer) as server:
        profile = streaming_profile(server, "openai_compatible", timeout=5)
        conversation = create_conversation(owner=user, profile=profile)
        run = run_tool_loop(conversation=conversation, content="Go", profile=profile)

    assert run.status == Run.Status.FAILED and run.error_code == "provider_http_error"
    (call,) = ModelCall.objects.filter(run=run)
    assert not call.estimated and call.prompt_tokens == call.completion_tokens == 0


class CancelsWhenAsked:
    """The real adapter; the run's stop is requested as the request goes out (in the loop's thread)."""

    def __init__(self, inner: Any, run_id: Any) -> None:
        self.inner = inner
        self.provider_name = inner.provider_name
        self.run_id = run_id

    def complete(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        raise AssertionError("the profile streams")

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> Iterator[StreamEvent]:
        cancel_run(run=Run.objects.get(pk=self.run_id))
        return self.inner.stream(messages, tools=tools, options=options)

    def close(self) -> None:
        self.inner.close()


def test_a_stopped_stream_is_charged_an_estimate_that_a_budget_then_blocks(user, streaming_profile):
    wire = WIRES["openai_compatible"]
    answer = keep_alives_after("openai_compatible", wire.delta("Half an "), wire.delta("answer"))
    with FakeProviderServer(answer) as server:
        profile = streaming_profile(server, "openai_compatible", timeout=30)
        Budget.objects.create(
            name="alice", scope="user", user=user, period="day", token_limit=5, action="block"
        )
        conversation = create_conversation(owner=user, profile=profile)
        run = start_run(conversation=conversation, content="Go", profile=profile)
        with contextlib.closing(CancelsWhenAsked(build_provider(profile), run.pk)) as asking:
            stopped = execute_run(run=run, provider=asking)

        assert stopped.status == Run.Status.CANCELLED
        (call,) = ModelCall.objects.filter(run=run)
        assert call.estimated and call.prompt_tokens > 0
        assert call.prompt_tokens + call.completion_tokens > 5  # the estimate passes the budget
        # The call's reservation (its prompt and up to 4,096 tokens written) was replaced
        # by the estimate, not added to it.
        counter = BudgetCounter.objects.get()
        assert (counter.tokens, counter.calls) == (call.prompt_tokens + call.completion_tokens, 1)
        stored = Message.objects.filter(run=run, role="assistant").first()
        if stored is not None:  # text arrived before the stop was seen
            assert stored.finish_reason == CANCELLED_FINISH_REASON and stored.usage_estimated

        blocked = run_tool_loop(conversation=conversation, content="Again", profile=profile)
    assert blocked.status == Run.Status.BUDGET_EXHAUSTED and blocked.error_code == "budget_exceeded"
    assert len(server.requests) == 1
