"""OpenTelemetry spans and metrics of a run, checked with the SDK's in-memory exporter and reader."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conversations.domain import ToolCall, Usage
from conversations.exceptions import ProviderTimeout
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop
from conversations.tools import registry, tool

sdk = pytest.importorskip("opentelemetry.sdk", reason="the dev extra pins the OpenTelemetry SDK")

from opentelemetry import metrics, trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode  # noqa: E402

pytestmark = pytest.mark.django_db

SECRET_QUESTION = "my private question 7f3a"
SECRET_ARGUMENT = 40417


class Telemetry:
    """The process's tracer and meter providers (OpenTelemetry allows setting them once)."""

    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    installed = False

    @classmethod
    def install(cls) -> None:
        if not cls.installed:
            tracer_provider = TracerProvider()
            tracer_provider.add_span_processor(SimpleSpanProcessor(cls.exporter))
            trace.set_tracer_provider(tracer_provider)
            metrics.set_meter_provider(MeterProvider(metric_readers=[cls.reader]))
            cls.installed = True


@pytest.fixture
def telemetry():
    Telemetry.install()
    Telemetry.exporter.clear()
    Telemetry.reader.get_metrics_data()  # drop what earlier tests recorded (cumulative: kept)
    return Telemetry


@pytest.fixture
def adder():
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        yield r


def run_with_a_tool(conversation):
    provider = ScriptedProvider(
        [
            scripted_calls(
                ToolCall(id="call-1", name="add", arguments={"a": SECRET_ARGUMENT, "b": 2}),
                usage=Usage(prompt_tokens=30, completion_tokens=7),
            ),
            scripted_text("40419", usage=Usage(prompt_tokens=50, completion_tokens=3), model="m-2"),
        ]
    )
    return run_tool_loop(conversation=conversation, content=SECRET_QUESTION, provider=provider)


def spans_by_name(telemetry):
    return {span.name: span for span in telemetry.exporter.get_finished_spans()}


def test_a_run_emits_agent_chat_and_tool_spans(telemetry, demo_conversation, adder):
    run = run_with_a_tool(demo_conversation)
    spans = telemetry.exporter.get_finished_spans()
    assert [span.name for span in spans] == [
        "chat demo-model",
        "execute_tool add",
        "chat demo-model",
        "invoke_agent demo",
    ]
    agent = spans[-1]
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.conversation.id"] == str(run.conversation_id)
    first, tool_span, second = spans[:3]
    for span in (first, tool_span, second):
        assert span.parent.span_id == agent.context.span_id
    assert dict(second.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "demo",
        "gen_ai.request.model": "demo-model",
        "gen_ai.conversation.id": str(run.conversation_id),
        "gen_ai.response.model": "m-2",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 50,
        "gen_ai.usage.output_tokens": 3,
    }
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert dict(tool_span.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call-1",
    }
    assert tool_span.status.status_code != StatusCode.ERROR


def test_no_content_in_spans_by_default(telemetry, demo_conversation, adder):
    run_with_a_tool(demo_conversation)
    for span in telemetry.exporter.get_finished_spans():
        text = json.dumps(dict(span.attributes))
        assert SECRET_QUESTION not in text
        assert str(SECRET_ARGUMENT) not in text


def test_content_is_recorded_when_switched_on(telemetry, demo_conversation, adder, settings):
    settings.CONVERSATIONS = {"TRACE_CONTENT": True}
    run_with_a_tool(demo_conversation)
    spans = spans_by_name(telemetry)
    assert SECRET_QUESTION in spans["chat demo-model"].attributes["gen_ai.input.messages"]
    tool_span = spans["execute_tool add"]
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"])["a"] == SECRET_ARGUMENT
    assert tool_span.attributes["gen_ai.tool.call.result"] == str(SECRET_ARGUMENT + 2)


def test_concurrent_calls_nest_under_the_agent_span_and_a_tools_own_spans_under_theirs(
    telemetry, demo_conversation
):
    tracer = trace.get_tracer("a-tool-library")
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def lookup(key: str) -> str:
            """A worker thread: its own span must nest under the call's span."""
            with tracer.start_as_current_span(f"inner {key}"):
                return key

        @tool(registry=r)
        async def alookup(key: str) -> str:
            """The event loop: the same."""
            with tracer.start_as_current_span(f"inner {key}"):
                return key

        @tool(registry=r, timeout=0.05)
        def stuck() -> str:
            """Past its timeout."""
            time.sleep(0.5)
            return "late"

        provider = ScriptedProvider(
            [
                scripted_calls(
                    ToolCall(id="t1", name="lookup", arguments={"key": "one"}),
                    ToolCall(id="t2", name="lookup", arguments={"key": "two"}),
                    ToolCall(id="t3", name="alookup", arguments={"key": "three"}),
                    ToolCall(id="t4", name="stuck", arguments={}),
                ),
                scripted_text("done"),
            ]
        )
        run_tool_loop(conversation=demo_conversation, content="go", provider=provider)
    spans = telemetry.exporter.get_finished_spans()
    (agent,) = [span for span in spans if span.name.startswith("invoke_agent")]
    calls = {
        span.attributes["gen_ai.tool.call.id"]: span
        for span in spans
        if span.name.startswith("execute_tool")
    }
    assert set(calls) == {"t1", "t2", "t3", "t4"}
    for span in calls.values():
        assert span.parent.span_id == agent.context.span_id
        assert span.context.trace_id == agent.context.trace_id
    inner = {span.name: span for span in spans if span.name.startswith("inner")}
    for call_id, key in (("t1", "one"), ("t2", "two"), ("t3", "three")):
        assert inner[f"inner {key}"].parent.span_id == calls[call_id].context.span_id
    assert calls["t4"].status.status_code == StatusCode.ERROR
    assert calls["t4"].attributes["error.type"] == "timed_out"


def test_a_failed_call_is_an_error_span_with_its_code_only(telemetry, demo_conversation):
    provider = ScriptedProvider([ProviderTimeout("openai: no answer; key sk-SECRET")])
    run_tool_loop(conversation=demo_conversation, content="hi", provider=provider)
    chat = spans_by_name(telemetry)["chat demo-model"]
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["error.type"] == "provider_timeout"
    assert "sk-SECRET" not in json.dumps(dict(chat.attributes)) + str(chat.status.description)
    assert chat.events == ()


def test_token_usage_and_duration_metrics(telemetry, demo_conversation, adder):
    run_with_a_tool(demo_conversation)
    data = telemetry.reader.get_metrics_data()
    metrics_by_name = {
        metric.name: metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    usage = metrics_by_name["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    sums = {}
    for point in usage.data.data_points:
        if point.attributes["gen_ai.request.model"] == "demo-model":
            kind = point.attributes["gen_ai.token.type"]
            sums[kind] = sums.get(kind, 0) + point.sum
    # Cumulative over the process: at least this run's tokens.
    assert sums["input"] >= 80 and sums["output"] >= 10
    duration = metrics_by_name["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    assert sum(point.count for point in duration.data.data_points) >= 2


def test_without_the_extra_nothing_is_imported_and_spans_do_nothing():
    # A fresh interpreter where ``opentelemetry`` cannot be imported.
    script = textwrap.dedent(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError("blocked for the test")
                return None

        sys.meta_path.insert(0, Block())
        import django, os
        os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings_test"
        django.setup()
        from conversations.services.usage import tracing
        from conversations.services.loop import tool_loop
        assert tracing.ENABLED is False
        with tracing.agent_span(profile="p", conversation_id="c", provider="x"):
            with tracing.chat_span(provider="x", model="m", conversation_id="c", messages=[]) as s:
                s.answered(None)
            t = tracing.start_tool_span(name="t", call_id="1", arguments={})
            with t.current():
                t.finished(status="failed", result="r")
        assert not [m for m in sys.modules if m.startswith("opentelemetry")]
        print("ok")
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_with_no_provider_configured_no_span_is_made_and_one_set_later_gets_them():
    # A fresh interpreter: OpenTelemetry installed, no provider set (yet).
    script = textwrap.dedent(
        """
        import django, os
        os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings_test"
        django.setup()
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from conversations.services.usage import tracing

        def spans():
            with tracing.agent_span(profile="p", conversation_id="c", provider="x"):
                with tracing.chat_span(provider="x", model="m", conversation_id="c", messages=[]) as c:
                    pass
                t = tracing.start_tool_span(name="t", call_id="1", arguments={})
                with t.current():
                    t.finished(status="succeeded", result="r")
            return c.span, t.span

        assert spans() == (None, None)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        chat, tool = spans()  # meters only: the chat span's duration is measured
        assert chat is not None and tool is None
        assert reader.get_metrics_data() is not None
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        chat, tool = spans()
        assert chat.is_recording() is False and tool.is_recording() is False  # ended
        names = sorted(span.name for span in exporter.get_finished_spans())
        assert names == ["chat m", "execute_tool t", "invoke_agent p"], names
        print("ok")
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
