"""The tools of the test workers.

``slow_step``: writes a line to ``$WORKER_TOOL_LOG`` when it starts, then sleeps.

The line is the tests' proof of how often the tool body ran (a side effect
outside the database, which no rollback or recovery can hide); the sleep
gives them time to kill the worker or cancel the run in the middle of it.

``stream_words``: publishes live text deltas from the worker, as a streaming
model answer would, for the tests of live events across processes.
"""

from __future__ import annotations

import os
import time
from typing import Annotated

from conversations import events
from conversations.tools import ToolContext, tool


@tool
def slow_step(
    seconds: Annotated[float, "How long to take"] = 1.0,
    label: Annotated[str, "Written to the log"] = "step",
) -> str:
    """Take a while, leaving a trace that the tool ran."""
    path = os.environ.get("WORKER_TOOL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{label} {os.getpid()}\n")
            log.flush()
    time.sleep(seconds)
    return f"{label} done"


STREAM_SEQ_BASE = 1000
"""Where ``stream_words`` numbers its deltas (above any the loop's own answers reach in tests)."""


@tool
def stream_words(
    context: ToolContext,
    count: Annotated[int, "How many words"] = 20,
    pause: Annotated[float, "Seconds between two words"] = 0.01,
) -> str:
    """Publish words as live text deltas of the run, the way the loop streams an answer."""
    text = ""
    for number in range(1, count + 1):
        word = f"w{number} "
        text += word
        seq = STREAM_SEQ_BASE + number
        snapshot = {"seq": seq, "text": text, "reasoning": "", "tool_calls": []}
        events.set_inflight(context.run_id, snapshot)
        events.publish(context.run_id, "text.delta", {"seq": seq, "text": word})
        time.sleep(pause)
    events.clear_inflight(context.run_id)
    return f"{count} words"
