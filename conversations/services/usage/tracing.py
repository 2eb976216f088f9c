"""OpenTelemetry spans and metrics for runs, model calls and tools (the optional ``otel`` extra).

Names and attributes follow the OpenTelemetry GenAI semantic conventions:
``invoke_agent {profile}`` per run, ``chat {model}`` per model call and
``execute_tool {name}`` per tool call, plus the histograms
``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``.
Spans go to whatever tracer and meter providers the host configured; with
none, OpenTelemetry's defaults drop them.

Message content, tool arguments and tool results are recorded only when
``CONVERSATIONS["TRACE_CONTENT"]`` is true: they may hold personal data.

Without ``opentelemetry-api`` installed, every function here returns a span
that does nothing, and no OpenTelemetry module is imported. With it but no
tracer provider configured (no meter provider either, for ``chat``), the
same: OpenTelemetry would drop the spans, so none is made.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from conversations.conf import app_settings
from conversations.domain import ChatMessage, CompletionResponse

if TYPE_CHECKING:
    from opentelemetry.trace import Span

try:
    from opentelemetry import metrics, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # the extra is not installed: every span is a no-op
    trace = None  # type: ignore[assignment]
    metrics = None  # type: ignore[assignment]
    _UNSET: tuple[type, ...] = ()
else:
    # The providers OpenTelemetry hands out while the host has configured none: spans and
    # measurements made through them are dropped, so none is made.
    _UNSET = (trace.ProxyTracerProvider, trace.NoOpTracerProvider, metrics.NoOpMeterProvider)
    try:
        from opentelemetry.metrics._internal import _ProxyMeterProvider
    except ImportError:  # moved: meters count as configured
        pass
    else:
        _UNSET += (_ProxyMeterProvider,)

__all__ = [
    "ENABLED",
    "CallSpan",
    "ToolSpan",
    "agent_span",
    "chat_span",
    "start_tool_span",
]

ENABLED = trace is not None
"""Whether ``opentelemetry-api`` is importable (then spans are emitted)."""

INSTRUMENTATION = "conversations"


def _tracing() -> bool:
    """Whether a tracer provider is configured: without one every span is dropped unseen."""
    return not isinstance(trace.get_tracer_provider(), _UNSET)


def _metering() -> bool:
    """Whether a meter provider is configured: without one every measurement is dropped."""
    return not isinstance(metrics.get_meter_provider(), _UNSET)


def _content_on() -> bool:
    return app_settings().TRACE_CONTENT


def _messages_json(messages: Sequence[ChatMessage]) -> str:
    return json.dumps([message.to_dict() for message in messages], ensure_ascii=False)


class CallSpan:
    """The span of one model call; :meth:`answered` adds what the provider said."""

    def __init__(self, span: Span | None, attributes: dict[str, Any]) -> None:
        self.span = span
        self.attributes = attributes

    def answered(self, response: CompletionResponse) -> None:
        """Record the response's model, finish reason and token counts (and content if on)."""
        if self.span is None or metrics is None:
            return
        usage = response.usage
        self.span.set_attributes(
            {
                "gen_ai.response.model": response.model,
                "gen_ai.response.finish_reasons": [response.finish_reason],
                "gen_ai.usage.input_tokens": usage.prompt_tokens,
                "gen_ai.usage.output_tokens": usage.completion_tokens,
            }
        )
        if _content_on():
            self.span.set_attribute(
                "gen_ai.output.messages", _messages_json([response.to_message()])
            )
        histogram = metrics.get_meter(INSTRUMENTATION).create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens per model call."
        )
        base = {**self.attributes, "gen_ai.response.model": response.model}
        histogram.record(usage.prompt_tokens, {**base, "gen_ai.token.type": "input"})
        histogram.record(usage.completion_tokens, {**base, "gen_ai.token.type": "output"})


class ToolSpan:
    """The span of one tool call; :meth:`finished` adds its outcome.

    It is started by :func:`start_tool_span` in the loop's thread and ended by
    :meth:`finished`, whichever thread calls it.
    """

    def __init__(self, span: Span | None) -> None:
        self.span = span

    def finished(self, *, status: str, result: str) -> None:
        """Record how the call ended (and its result if content tracing is on)."""
        if self.span is None:
            return
        if status != "succeeded":
            self.span.set_attribute("error.type", status)
            self.span.set_status(Status(StatusCode.ERROR))
        if _content_on():
            self.span.set_attribute("gen_ai.tool.call.result", result)
        self.span.end()

    @contextmanager
    def current(self) -> Iterator[None]:
        """Make this span the current one inside the block (in a worker thread or task).

        The tool's own spans (an HTTP client's, a database driver's) then nest
        under it; the block does not end it.
        """
        if self.span is None or trace is None:
            yield
            return
        with trace.use_span(self.span, end_on_exit=False):
            yield


@contextmanager
def agent_span(*, profile: str, conversation_id: Any, provider: str) -> Iterator[None]:
    """``invoke_agent {profile}``: one run of the tool loop."""
    if trace is None or not _tracing():
        yield
        return
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": profile,
        "gen_ai.provider.name": provider,
        "gen_ai.conversation.id": str(conversation_id),
    }
    tracer = trace.get_tracer(INSTRUMENTATION)
    name = f"invoke_agent {profile}".strip()
    with tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes):
        yield


@contextmanager
def chat_span(
    *, provider: str, model: str, conversation_id: Any, messages: Sequence[ChatMessage]
) -> Iterator[CallSpan]:
    """``chat {model}``: one request to a provider; errors are recorded and re-raised."""
    if trace is None or metrics is None or not (_tracing() or _metering()):
        yield CallSpan(None, {})
        return
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    }
    tracer = trace.get_tracer(INSTRUMENTATION)
    duration = metrics.get_meter(INSTRUMENTATION).create_histogram(
        "gen_ai.client.operation.duration", unit="s", description="Duration of model calls."
    )
    started = time.monotonic()
    outcome: dict[str, Any] = {}
    span_attributes = {**attributes, "gen_ai.conversation.id": str(conversation_id)}
    with tracer.start_as_current_span(
        f"chat {model}".strip(),
        kind=SpanKind.CLIENT,
        attributes=span_attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        if _content_on():
            span.set_attribute("gen_ai.input.messages", _messages_json(messages))
        try:
            yield CallSpan(span, attributes)
        except Exception as exc:
            code = getattr(exc, "code", None) or type(exc).__name__
            outcome["error.type"] = code
            span.set_attribute("error.type", code)
            # Only the code: provider error text may quote the request.
            span.set_status(Status(StatusCode.ERROR, code))
            raise
        finally:
            duration.record(time.monotonic() - started, {**attributes, **outcome})


def start_tool_span(*, name: str, call_id: str, arguments: Any) -> ToolSpan:
    """``execute_tool {name}`` started now, as a child of this thread's current span.

    For a call executed elsewhere (a worker thread, an event loop): make it
    current there with :meth:`ToolSpan.current`; :meth:`ToolSpan.finished` ends it.
    """
    if trace is None or not _tracing():
        return ToolSpan(None)
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
    }
    if _content_on():
        attributes["gen_ai.tool.call.arguments"] = json.dumps(arguments, ensure_ascii=False)
    tracer = trace.get_tracer(INSTRUMENTATION)
    span = tracer.start_span(f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes)
    return ToolSpan(span)
