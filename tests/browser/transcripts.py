"""Stored conversations of the demo user for the browser tests, written before Playwright starts."""

from __future__ import annotations

import io
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from conversations.domain import ChatMessage, ToolCall, Usage
from conversations.models import Conversation, Run
from conversations.services import MessageDetails, append_messages
from conversations.services.loop import finish_run
from project.demo_tools.management.commands.setup_demo import DEMO_USERNAME

MARKDOWN_ANSWER = """# Trip plan

Some **bold**, some _emphasis_ and a [guide](https://example.org/guide).

- pack
- go

| City | Days |
| ---- | ---- |
| Leipzig | 2 |
| Dresden | 1 |

```python
def greet(name):
    return f"Hello {name}"
```

[click me](javascript:window.injected=1) and <img src=x onerror="window.injected=2">
<script>window.injected=3</script> ![pixel](https://example.org/p.png)
"""

STOPPED_ANSWER = "Once upon a time there was a"


def demo_user():
    call_command("setup_demo", stdout=io.StringIO())
    return get_user_model().objects.get(username=DEMO_USERNAME)


def conversation_with(owner, title: str, *turns: tuple[str, str, MessageDetails | None]):
    """A conversation of ``owner`` with (user text, answer, details) turns."""
    conversation = Conversation.objects.create(owner=owner, title=title)
    messages, details = [], []
    for question, answer, detail in turns:
        messages += [ChatMessage.user(question), ChatMessage.assistant(answer)]
        details += [None, detail]
    append_messages(conversation=conversation, messages=messages, details=details)
    return conversation


def markdown_conversation(owner):
    return conversation_with(owner, "Markdown sample", ("Plan my trip", MARKDOWN_ANSWER, None))


def stopped_conversation(owner):
    """An answer cut short by Stop, with the token figure the ledger recorded."""
    stopped = MessageDetails(
        model="demo-1", finish_reason="cancelled", usage=Usage(10, 42, estimated=True)
    )
    return conversation_with(owner, "Stopped sample", ("Tell me a story", STOPPED_ANSWER, stopped))


def long_conversation(owner, needle: str, at_turn: int, turns: int = 12):
    """Many turns; the user's message of turn ``at_turn`` holds ``needle``."""
    pairs = [
        (f"{needle} question {i}" if i == at_turn else f"question {i}", "An answer.\n\n" * 6, None)
        for i in range(turns)
    ]
    return conversation_with(owner, "Long conversation", *pairs)


def age(conversation, days: int) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(days=days)
    )


def stopped_turn_conversation(owner):
    """A turn whose two calls never ran: its run was stopped before any tool started."""
    conversation = Conversation.objects.create(owner=owner, title="Stopped turn")
    run = Run.objects.create(conversation=conversation, status=Run.Status.RUNNING, max_iterations=3)
    calls = [
        ToolCall(id="call_weather", name="get_weather", arguments={"city": "Leipzig"}),
        ToolCall(id="call_time", name="get_current_time", arguments={}),
    ]
    append_messages(
        conversation=conversation,
        messages=[ChatMessage.user("Weather and time?"), ChatMessage.assistant_tool_calls(calls)],
        run=run,
    )
    finish_run(run=run, status=Run.Status.CANCELLED, error_code="run_cancelled")
    return conversation
