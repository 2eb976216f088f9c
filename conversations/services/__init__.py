"""Writes: one module per use case; the public functions are re-exported here.

``messages`` appends under the grammar, ``runs`` starts, claims, heartbeats,
cancels and finishes runs, ``tool_calls`` checks, executes and answers calls
(and holds every text the model is told about them), ``tool_loop`` drives the
rounds, ``approvals`` holds a turn for a human decision, ``decisions`` stores
decisions and resumes runs, ``recovery`` ends runs whose process died,
``executors`` chooses who executes a run, ``conversations`` imports, updates,
deletes and exports.
"""

from .approvals import approval_levels, approval_required, arguments_digest
from .conversations import (
    EXPORT_FORMATS,
    delete_conversation,
    export_payload,
    import_conversation,
    update_conversation,
)
from .decisions import Decision, can_decide, decide_approval, expire_approvals
from .executors import requeue_runs, submit_message, submit_run, uses_workers
from .messages import MessageDetails, append_messages, create_conversation
from .providers import build_provider, completion_options, provider_from_record
from .recovery import recover_runs
from .runs import (
    cancel_run,
    claim_run,
    end_unclaimed_run,
    finish_run,
    start_run,
    worker_name,
)
from .tool_calls import answer_open_calls
from .tool_loop import RequestSetup, execute_run, request_setup, run_tool_loop

__all__ = [
    "EXPORT_FORMATS",
    "Decision",
    "MessageDetails",
    "RequestSetup",
    "answer_open_calls",
    "append_messages",
    "approval_levels",
    "approval_required",
    "arguments_digest",
    "build_provider",
    "can_decide",
    "cancel_run",
    "claim_run",
    "completion_options",
    "create_conversation",
    "decide_approval",
    "delete_conversation",
    "end_unclaimed_run",
    "execute_run",
    "expire_approvals",
    "export_payload",
    "finish_run",
    "import_conversation",
    "provider_from_record",
    "recover_runs",
    "request_setup",
    "requeue_runs",
    "run_tool_loop",
    "start_run",
    "submit_message",
    "submit_run",
    "update_conversation",
    "uses_workers",
    "worker_name",
]
