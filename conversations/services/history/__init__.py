"""Use cases over whole conversations: branches, import and export, retention.

``branches`` forks, edits and regenerates, ``conversations`` imports,
exports, updates and deletes, ``retention`` purges, erases and redacts. They
build on the transcript and, to answer a branch, on the loop.
"""

from .branches import (
    Turn,
    branch_for_edit,
    branch_for_regenerate,
    edit_message,
    fork_conversation,
    regenerate_answer,
)
from .conversations import (
    EXPORT_FORMATS,
    ExportedView,
    delete_conversation,
    export_payload,
    export_view,
    import_conversation,
    update_conversation,
)
from .retention import (
    MODES,
    RetentionReport,
    erase_user,
    expired_conversations,
    purge_conversations,
    redact_conversation,
)

__all__ = [
    "EXPORT_FORMATS",
    "MODES",
    "ExportedView",
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
]
