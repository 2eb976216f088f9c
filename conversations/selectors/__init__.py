"""Reads: stored rows turned into value objects, and the querysets views and the admin use.

``history`` maps the transcript to ``ChatMessage`` values, ``config`` reads
profiles and tools, ``listings`` builds what the API and the admin list.
Nothing here writes.
"""

from .approvals import (
    decidable_approvals,
    owned_tool_call_exists,
    tool_call_approval,
    visible_approvals,
)
from .config import (
    ToolSettings,
    active_profiles,
    available_tools,
    disabled_tool_names,
    get_default_profile,
    tool_settings,
)
from .feedback import (
    conversation_feedback,
    feedback_on,
    owned_message,
    owned_run,
    owned_tool_call,
    run_scores,
)
from .history import (
    TranscriptTail,
    get_history,
    history_and_tail,
    history_for_provider,
    message_to_domain,
    open_tool_calls,
    tool_call_to_domain,
    transcript_tail,
)
from .listings import (
    admin_conversations,
    admin_messages,
    admin_runs,
    admin_tool_calls,
    conversation_family,
    conversation_messages,
    conversation_transcript,
    conversations_with_summary,
    count_of,
    has_live_run,
    has_running_run,
    last_run_status,
    owned_conversations,
    owned_runs,
    run_messages,
    run_trace,
    run_with_calls,
    runs_with_calls,
    with_tool_calls,
)
from .outputs import owned_output_schemas, owned_outputs

__all__ = [
    "ToolSettings",
    "TranscriptTail",
    "active_profiles",
    "admin_conversations",
    "admin_messages",
    "admin_runs",
    "admin_tool_calls",
    "available_tools",
    "conversation_family",
    "conversation_feedback",
    "conversation_messages",
    "conversation_transcript",
    "conversations_with_summary",
    "count_of",
    "decidable_approvals",
    "disabled_tool_names",
    "feedback_on",
    "get_default_profile",
    "get_history",
    "has_live_run",
    "has_running_run",
    "history_and_tail",
    "history_for_provider",
    "last_run_status",
    "message_to_domain",
    "open_tool_calls",
    "owned_conversations",
    "owned_message",
    "owned_output_schemas",
    "owned_outputs",
    "owned_run",
    "owned_runs",
    "owned_tool_call",
    "owned_tool_call_exists",
    "run_messages",
    "run_scores",
    "run_trace",
    "run_with_calls",
    "runs_with_calls",
    "tool_call_approval",
    "tool_call_to_domain",
    "tool_settings",
    "transcript_tail",
    "visible_approvals",
    "with_tool_calls",
]
