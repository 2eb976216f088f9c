"""The tool loop: runs, rounds, the tool runner, the hand-written hot path, fencing, recovery.

A run is started (``start_run``), handed to an executor (``submit_message``,
``submit_run``: the request itself or a Celery worker), claimed by one process
(``claim_run``, fenced by its worker name), driven round by round
(``run_tool_loop``: ask the model, store its turn, run its tools, store their
answers) and finished, cancelled or recovered after a crash. Modules of this
package import each other's modules directly; the names below are what the
rest of the app uses.
"""

from .agents import agent_tools
from .executors import requeue_runs, resume_parent, submit_message, submit_run, uses_workers
from .recovery import MIN_LEASE_SECONDS, recover_runs
from .runs import cancel_run, claim_run, end_unclaimed_run, finish_run, start_run, worker_name
from .tool_calls import (
    INVALID_ARGUMENTS,
    TOOL_ERROR,
    TOOL_FAILED,
    UNKNOWN_TOOL,
    answer_open_calls,
    tool_error_text,
)
from .tool_loop import RequestSetup, execute_run, request_setup, run_agent, run_tool_loop

__all__ = [
    "INVALID_ARGUMENTS",
    "MIN_LEASE_SECONDS",
    "TOOL_ERROR",
    "TOOL_FAILED",
    "UNKNOWN_TOOL",
    "RequestSetup",
    "agent_tools",
    "answer_open_calls",
    "cancel_run",
    "claim_run",
    "end_unclaimed_run",
    "execute_run",
    "finish_run",
    "recover_runs",
    "request_setup",
    "requeue_runs",
    "resume_parent",
    "run_agent",
    "run_tool_loop",
    "start_run",
    "submit_message",
    "submit_run",
    "tool_error_text",
    "uses_workers",
    "worker_name",
]
