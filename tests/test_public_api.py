"""Each public package's exported names, pinned: adding or removing one is a visible change.

``conversations.services`` exports the documented use cases a host project
calls (submitting and running, cancelling and recovering, deciding approvals,
branches, retention, import and export, usage, checking a provider), and
nothing else; the capability packages under it export what the rest of the
app uses. A change to a list here belongs in the CHANGELOG.
"""

import importlib

import pytest

EXPORTS = {
    "conversations.services": [
        "ConnectionCheck",
        "MessageDetails",
        "RetentionReport",
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
        "purge_conversations",
        "rebuild_search_index",
        "recover_runs",
        "redact_conversation",
        "regenerate_answer",
        "run_tool_loop",
        "start_run",
        "store_output_schema",
        "submit_message",
        "update_conversation",
    ],
    "conversations.services.loop": [
        "INVALID_ARGUMENTS",
        "MIN_LEASE_SECONDS",
        "RequestSetup",
        "TOOL_ERROR",
        "TOOL_FAILED",
        "UNKNOWN_TOOL",
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
    ],
    "conversations.services.transcript": [
        "MessageDetails",
        "append_messages",
        "create_conversation",
        "install_search_index",
        "install_search_triggers",
        "rebuild_search_index",
        "record_provider_activity",
        "remove_search_index",
    ],
    "conversations.services.history": [
        "EXPORT_FORMATS",
        "ExportedView",
        "MODES",
        "RetentionReport",
        "Turn",
        "branch_for_edit",
        "branch_for_regenerate",
        "delete_conversation",
        "edit_message",
        "erase_user",
        "expired_conversations",
        "export_payload",
        "export_view",
        "fork_conversation",
        "import_conversation",
        "purge_conversations",
        "redact_conversation",
        "regenerate_answer",
        "update_conversation",
    ],
    "conversations.services.usage": [
        "BudgetCheck",
        "BudgetStatus",
        "Prices",
        "budget_statuses",
        "call_cost",
        "check_budgets",
        "period_bounds",
    ],
    "conversations.services.approvals": [
        "Decision",
        "approval_levels",
        "approval_required",
        "arguments_digest",
        "can_decide",
        "decide_approval",
        "expire_approvals",
        "resolve_approval_level",
    ],
    "conversations.services.configuration": [
        "AGENT_TOOL_PREFIX",
        "ConnectionCheck",
        "KEYLESS_ADAPTERS",
        "accepted_sampling_parameters",
        "agent_tool_name",
        "build_provider",
        "check_agents",
        "check_connection",
        "completion_options",
        "offered_provider_tools",
        "profile_provider_tools",
        "provider_from_record",
    ],
    "conversations.tools": [
        "DEFAULT_MAX_RESULT_BYTES",
        "TOOLS_MODULE",
        "TRUNCATION_MARKER",
        "Tool",
        "ToolContext",
        "ToolError",
        "ToolRegistry",
        "autodiscover",
        "call_tool",
        "encode_result",
        "execute",
        "execute_async",
        "registry",
        "tool",
        "truncate_result",
        "validate_arguments",
    ],
    "conversations.providers": [
        "AnthropicProvider",
        "ChatProvider",
        "CompletionOptions",
        "DemoProvider",
        "GeminiProvider",
        "HTTPProvider",
        "OllamaProvider",
        "OpenAIProvider",
        "OpenAIResponsesProvider",
        "ScriptedProvider",
        "scripted_calls",
        "scripted_stream",
        "scripted_text",
    ],
    "conversations.domain": [
        "ChatMessage",
        "CompletionResponse",
        "InvalidArgumentError",
        "PROVIDER_TOOL_KINDS",
        "ProviderTool",
        "ProviderToolActivity",
        "ReasoningDelta",
        "Role",
        "SourceCitation",
        "StreamEvent",
        "TOOL_NAME_PATTERN",
        "TextDelta",
        "ToolCall",
        "ToolCallDelta",
        "ToolSpec",
        "USAGE_FIELDS",
        "Usage",
        "normalise_messages",
        "parse_provider_tools",
    ],
    "conversations.events": [
        "AGENT_PREFIX",
        "CHANGED",
        "DELTA_TYPES",
        "INFLIGHT_SECONDS",
        "LiveEvent",
        "READY_SECONDS",
        "Subscription",
        "ainflight",
        "asubscribe",
        "backend",
        "clear_inflight",
        "inflight",
        "publish",
        "reset",
        "set_inflight",
        "subscribe",
        "transport_of",
    ],
}


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_each_public_package_exports_exactly_the_pinned_names(module):
    assert sorted(importlib.import_module(module).__all__) == EXPORTS[module]


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_every_exported_name_resolves_and_none_is_private(module):
    package = importlib.import_module(module)
    for name in package.__all__:
        assert not name.startswith("_"), f"{module} exports the private name {name}"
        assert getattr(package, name, None) is not None, f"{module}.{name} does not resolve"


def test_the_services_package_exports_only_use_cases_not_loop_steps():
    from conversations import services

    for internal in ("claim_run", "worker_name", "finish_run", "request_setup", "RequestSetup"):
        assert internal not in services.__all__
        assert not hasattr(services, internal), f"services.{internal} is still reachable"
