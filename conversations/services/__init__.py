"""The app's use cases: what a host project calls. Everything else is private.

The services are grouped by capability, each group a package whose
``__init__`` is its face for the rest of the app:

- ``loop``: runs, rounds, the tool runner, the hot path, fencing, recovery,
  executors (inline or Celery);
- ``history``: messages under the grammar, branches, import and export, the
  search index, retention;
- ``usage``: the ledger, prices, budgets, tracing;
- ``approvals``: the approval policy and decisions;
- ``configuration``: provider records into adapters, connection checks;
- ``attachments``: files stored once per owner by content, and their removal.

This module re-exports the documented use cases only; ``tests/test_public_api.py``
pins the list, so adding or removing one is a visible change.
"""

from .approvals.decisions import decide_approval
from .attachments import StoredAttachment, purge_attachments, store_attachment
from .configuration.providers import ConnectionCheck, build_provider, check_connection
from .history.branches import edit_message, fork_conversation, regenerate_answer
from .history.conversations import (
    delete_conversation,
    export_payload,
    import_conversation,
    update_conversation,
)
from .history.retention import (
    RetentionReport,
    erase_user,
    purge_conversations,
    redact_conversation,
)
from .loop.approvals import approval_required
from .loop.executors import submit_message
from .loop.extraction import extract
from .loop.output import store_output_schema
from .loop.recovery import recover_runs
from .loop.runs import cancel_run, start_run
from .loop.tool_loop import execute_run, run_tool_loop
from .transcript.messages import MessageDetails, append_messages, create_conversation
from .transcript.search_index import rebuild_search_index
from .usage.budgets import budget_statuses

__all__ = [
    "ConnectionCheck",
    "MessageDetails",
    "RetentionReport",
    "StoredAttachment",
    "append_messages",
    "approval_required",
    "budget_statuses",
    "build_provider",
    "cancel_run",
    "check_connection",
    "create_conversation",
    "decide_approval",
    "delete_conversation",
    "edit_message",
    "erase_user",
    "execute_run",
    "export_payload",
    "extract",
    "fork_conversation",
    "import_conversation",
    "purge_attachments",
    "purge_conversations",
    "rebuild_search_index",
    "recover_runs",
    "redact_conversation",
    "regenerate_answer",
    "run_tool_loop",
    "start_run",
    "store_attachment",
    "store_output_schema",
    "submit_message",
    "update_conversation",
]
