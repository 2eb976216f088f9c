"""The transcript: appending messages under the conversation grammar, and its search index.

``messages`` creates conversations and appends batches of messages (the
database rules check the grammar again); ``search_index`` installs and
rebuilds the full-text index the database keeps; ``provider_activity``
stores the tool calls a provider ran itself and the citations of a turn. The loop and the history
use cases both write through here.
"""

from .messages import MessageDetails, append_messages, create_conversation
from .provider_activity import record_provider_activity
from .search_index import (
    install_search_index,
    install_search_triggers,
    rebuild_search_index,
    remove_search_index,
)

__all__ = [
    "MessageDetails",
    "append_messages",
    "create_conversation",
    "install_search_index",
    "install_search_triggers",
    "rebuild_search_index",
    "record_provider_activity",
    "remove_search_index",
]
