"""URLs of the REST API; the host mounts them with ``path("api/", include(...))``."""

from django.urls import path, re_path, register_converter

from . import docs, fallback
from .ai_sdk import views as ai_sdk
from .converters import RowIdConverter
from .resources import (
    approvals,
    attachments,
    branches,
    catalog,
    data,
    datasets,
    feedback,
    messages,
    outputs,
    runs,
    search,
    usage,
)
from .resources import conversations as conversation_views
from .sse import views as events

# Named after the app: converter names are global to the whole project.
register_converter(RowIdConverter, "conversations_row_id")

app_name = "conversations"

urlpatterns = [
    path("attachments/", attachments.AttachmentListView.as_view(), name="attachment-list"),
    path(
        "attachments/<uuid:attachment_id>/",
        attachments.AttachmentDetailView.as_view(),
        name="attachment-detail",
    ),
    path(
        "attachments/<uuid:attachment_id>/content/",
        attachments.AttachmentContentView.as_view(),
        name="attachment-content",
    ),
    path(
        "conversations/",
        conversation_views.ConversationListView.as_view(),
        name="conversation-list",
    ),
    path(
        "conversations/import/",
        conversation_views.ConversationImportView.as_view(),
        name="conversation-import",
    ),
    path(
        "conversations/<uuid:conversation_id>/",
        conversation_views.ConversationDetailView.as_view(),
        name="conversation-detail",
    ),
    path(
        "conversations/<uuid:conversation_id>/messages/",
        messages.ConversationMessagesView.as_view(),
        name="conversation-messages",
    ),
    path(
        "conversations/<uuid:conversation_id>/chat/",
        ai_sdk.ChatView.as_view(),
        name="conversation-chat",
    ),
    path(
        "conversations/<uuid:conversation_id>/runs/",
        runs.ConversationRunsView.as_view(),
        name="conversation-runs",
    ),
    path(
        "conversations/<uuid:conversation_id>/export/",
        conversation_views.ConversationExportView.as_view(),
        name="conversation-export",
    ),
    path(
        "conversations/<uuid:conversation_id>/fork/",
        branches.ForkView.as_view(),
        name="conversation-fork",
    ),
    path(
        "conversations/<uuid:conversation_id>/messages/<int:position>/edit/",
        branches.EditMessageView.as_view(),
        name="conversation-message-edit",
    ),
    path(
        "conversations/<uuid:conversation_id>/regenerate/",
        branches.RegenerateView.as_view(),
        name="conversation-regenerate",
    ),
    path(
        "conversations/<uuid:conversation_id>/branches/",
        branches.BranchListView.as_view(),
        name="conversation-branches",
    ),
    path(
        "conversations/<uuid:conversation_id>/messages/<int:position>/feedback/",
        feedback.MessageFeedbackView.as_view(),
        name="message-feedback",
    ),
    path(
        "conversations/<uuid:conversation_id>/feedback/",
        feedback.ConversationFeedbackView.as_view(),
        name="conversation-feedback",
    ),
    path("runs/<uuid:run_id>/", runs.RunDetailView.as_view(), name="run-detail"),
    path("runs/<uuid:run_id>/feedback/", feedback.RunFeedbackView.as_view(), name="run-feedback"),
    path("runs/<uuid:run_id>/scores/", feedback.RunScoresView.as_view(), name="run-scores"),
    path("runs/<uuid:run_id>/cancel/", runs.RunCancelView.as_view(), name="run-cancel"),
    path("runs/<uuid:run_id>/events/", events.run_events, name="run-events"),
    path("approvals/", approvals.ApprovalListView.as_view(), name="approval-list"),
    path(
        "tool-calls/<conversations_row_id:tool_call_id>/approve/",
        approvals.ToolCallApproveView.as_view(),
        name="tool-call-approve",
    ),
    path(
        "tool-calls/<conversations_row_id:tool_call_id>/reject/",
        approvals.ToolCallRejectView.as_view(),
        name="tool-call-reject",
    ),
    path(
        "tool-calls/<conversations_row_id:tool_call_id>/feedback/",
        feedback.ToolCallFeedbackView.as_view(),
        name="tool-call-feedback",
    ),
    path("export/", data.ExportAllView.as_view(), name="export"),
    path("datasets/export/", datasets.DatasetExportView.as_view(), name="dataset-export"),
    path("search/", search.SearchView.as_view(), name="search"),
    path("tools/", catalog.ToolListView.as_view(), name="tool-list"),
    path("profiles/", catalog.ProfileListView.as_view(), name="profile-list"),
    path("usage/", usage.UsageView.as_view(), name="usage"),
    path("outputs/", outputs.OutputListView.as_view(), name="output-list"),
    path("output-schemas/", outputs.OutputSchemaListView.as_view(), name="output-schema-list"),
    path("schema/", docs.SchemaView.as_view(), name="schema"),
    path("docs/", docs.DocsView.as_view(), name="docs"),
    # Last: whatever else is under the mount (an unknown path, a malformed id,
    # a missing trailing slash) gets the API's JSON 404, not the host's page.
    re_path(r"^(?P<path>.*)$", fallback.route_not_found, name="not-found"),
]
