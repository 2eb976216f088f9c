"""A cancellation asked for while a turn's calls stream: the turn is stored, none of its tools start.

The stream checks the run's flag only every so often (a query per check), so
a cancellation can come too late for the stream to see and yet before the
turn is stored. The statement that stores the turn reads the flag too: then
every call of the turn is answered cancelled, none starts, and the run ends
``cancelled``. The tests ask for the cancellation at exactly that moment,
where the loop forgets the answer's in-flight snapshot (``snapshot_hook``).
"""

from __future__ import annotations

import pytest

from conversations import signals
from conversations.domain import ToolCall, ToolCallDelta
from conversations.models import Message, Run, ToolApproval
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_stream
from conversations.services import cancel_run
from conversations.services.loop.runs import start_run
from conversations.services.loop.tool_loop import execute_run
from conversations.services.transcript.messages import create_conversation
from conversations.tools import registry, tool

pytestmark = pytest.mark.django_db

CANCELLED_TEXT = 'Error: tool "{name}" was cancelled and did not complete.'


@pytest.fixture
def executed():
    return []


@pytest.fixture
def tools(executed):
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            executed.append(("add", a, b))
            return a + b

        @tool(registry=r, requires_approval=True)
        def send_mail(to: str) -> str:
            """Send a mail (needs a decision)."""
            executed.append(("send_mail", to))
            return "sent"

        yield r


@pytest.fixture
def started():
    """Every ``tool_call_started`` signal sent."""
    seen: list[str] = []

    def receiver(sender, tool_call, run, **kwargs):
        seen.append(tool_call.call_id)

    signals.tool_call_started.connect(receiver)
    yield seen
    signals.tool_call_started.disconnect(receiver)


def streamed_calls(*calls: ToolCall):
    """A turn whose calls stream in two pieces each, then the turn itself."""
    deltas = []
    for index, call in enumerate(calls):
        text = call.arguments_json
        deltas += [
            ToolCallDelta(index, call.id, call.name, text[:3]),
            ToolCallDelta(index, None, None, text[3:]),
        ]
    return scripted_stream(*deltas, scripted_calls(*calls))


def run_cancelled_before_storing(user, profile, snapshot_hook, *calls: ToolCall) -> Run:
    profile.stream = True
    profile.save(update_fields=["stream"])
    conversation = create_conversation(owner=user, profile=profile)
    # Only one answer is scripted: a second model call would raise ScriptExhausted.
    provider = ScriptedProvider([streamed_calls(*calls)])
    run = start_run(conversation=conversation, content="go", profile=profile, provider=provider)
    snapshot_hook(run.pk, lambda: cancel_run(run=Run.objects.get(pk=run.pk)))
    return execute_run(run=run, provider=provider)


def test_a_cancel_that_comes_as_the_calls_finish_streaming_starts_none_of_them(
    user, profile, tools, executed, started, snapshot_hook
):
    calls = (
        ToolCall(id="call_a", name="add", arguments={"a": 1, "b": 2}),
        ToolCall(id="call_b", name="add", arguments={"a": 3, "b": 4}),
    )
    ended = run_cancelled_before_storing(user, profile, snapshot_hook, *calls)

    assert executed == [] and started == []
    assert ended.status == Run.Status.CANCELLED and ended.error_code == "run_cancelled"
    rows = list(ToolCallRow.objects.filter(message__run=ended).order_by("index"))
    assert [(r.call_id, r.status, r.started_at) for r in rows] == [
        ("call_a", ToolCallRow.Status.CANCELLED, None),
        ("call_b", ToolCallRow.Status.CANCELLED, None),
    ]
    answers = Message.objects.filter(run=ended, role="tool").order_by("position")
    assert [(m.tool_call.call_id, m.content) for m in answers] == [
        ("call_a", CANCELLED_TEXT.format(name="add")),
        ("call_b", CANCELLED_TEXT.format(name="add")),
    ]
    assert ended.iterations == 1  # the turn was stored and counted


def test_a_call_that_needs_approval_is_answered_cancelled_not_held(
    user, profile, tools, executed, started, snapshot_hook
):
    call = ToolCall(id="call_m", name="send_mail", arguments={"to": "a@example.org"})
    ended = run_cancelled_before_storing(user, profile, snapshot_hook, call)

    assert executed == [] and started == []
    assert ended.status == Run.Status.CANCELLED
    assert not ToolApproval.objects.exists()
    row = ToolCallRow.objects.get(call_id="call_m")
    assert row.status == ToolCallRow.Status.CANCELLED
    answer = Message.objects.get(tool_call=row)
    assert answer.content == CANCELLED_TEXT.format(name="send_mail")
