"""``slow_step``: writes a line to ``$WORKER_TOOL_LOG`` when it starts, then sleeps.

The line is the tests' proof of how often the tool body ran (a side effect
outside the database, which no rollback or recovery can hide); the sleep
gives them time to kill the worker or cancel the run in the middle of it.
"""

from __future__ import annotations

import os
import time
from typing import Annotated

from conversations.tools import tool


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
