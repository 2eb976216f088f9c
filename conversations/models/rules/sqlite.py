"""The triggers of SQLite: the grammar, approvals, attachments, and the FTS5 search index.

A refusal is ``RAISE(ABORT, '<rule>: <why>')`` in a ``BEFORE`` trigger
(``SQLITE_CONSTRAINT_TRIGGER``), which Django raises as
``django.db.IntegrityError``. SQLite has no statement-level triggers and no
deferred ones: every check is row by row, and deleting an answer is left to
the application. It serialises writers, so the checks take no lock. A table
rebuild (``_remake_table``) drops the triggers on that table: a migration
that rebuilds one saves and restores them (``0010_hardening``).
"""

from __future__ import annotations

from typing import Final

from . import AGENT_DEPTH_MARK, Rule


def _refusal(name: str, timing: str, table: str, when: str, message: str) -> Rule:
    """A trigger that aborts the statement when ``when`` holds for the row."""
    return Rule(
        name,
        table,
        (
            f"CREATE TRIGGER {name} {timing} ON {table} FOR EACH ROW\n"
            f"WHEN {when}\n"
            f"BEGIN SELECT RAISE(ABORT, '{name}: {message}'); END;",
        ),
    )


# The partial index conversations_message_turn_idx covers the non-tool messages;
# SQLite uses it only for a condition written as the index has it.
def _turn(alias: str) -> str:
    return f"NOT ({alias}.role = 'tool')"


# The grammar: calls ------------------------------------------------------------------------

TOOLCALL_ASSISTANT_MESSAGE = _refusal(
    "conversations_toolcall_assistant_message",
    "BEFORE INSERT",
    "conversations_toolcall",
    """NOT EXISTS (SELECT 1 FROM conversations_message m
                WHERE m.id = NEW.message_id AND m.role = 'assistant')""",
    "a tool call must belong to an assistant message",
)

TOOLCALL_CONVERSATION_MATCH = _refusal(
    "conversations_toolcall_conversation_match",
    "BEFORE INSERT",
    "conversations_toolcall",
    """NOT EXISTS (SELECT 1 FROM conversations_message m
                WHERE m.id = NEW.message_id AND m.conversation_id = NEW.conversation_id)""",
    "a tool call must be in the conversation of its message",
)

TOOLCALL_NO_ORPHANS = _refusal(
    "conversations_toolcall_no_orphans",
    "BEFORE INSERT",
    "conversations_toolcall",
    f"""EXISTS (SELECT 1 FROM conversations_message own
            WHERE own.id = NEW.message_id
              AND EXISTS (SELECT 1 FROM conversations_message later
                           WHERE later.conversation_id = own.conversation_id
                             AND later."position" > own."position" AND {_turn("later")}))""",
    "a tool call cannot be added to an assistant turn that later messages follow",
)

TOOLCALL_IMMUTABLE = _refusal(
    "conversations_toolcall_immutable",
    "BEFORE UPDATE OF message_id, conversation_id",
    "conversations_toolcall",
    "NEW.message_id IS NOT OLD.message_id OR NEW.conversation_id IS NOT OLD.conversation_id",
    "the message and conversation of a tool call cannot change",
)

# The grammar: messages ---------------------------------------------------------------------

MESSAGE_ANSWER_PAIRING = _refusal(
    "conversations_message_answer_pairing",
    "BEFORE INSERT",
    "conversations_message",
    """NEW.tool_call_id IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM conversations_toolcall c
           JOIN conversations_message m ON m.id = c.message_id
          WHERE c.id = NEW.tool_call_id AND c.conversation_id = NEW.conversation_id
            AND m."position" < NEW."position")""",
    "a tool message must answer a call of its conversation made before it",
)

# Only the calls of the last turn before the new message can be open (every
# earlier turn was checked when the message after it was stored), or a call
# made after it.
MESSAGE_NO_ORPHANS = _refusal(
    "conversations_message_no_orphans",
    "BEFORE INSERT",
    "conversations_message",
    f"""NEW.role <> 'tool' AND EXISTS (
         SELECT c.id, c.call_id FROM conversations_toolcall c
          WHERE c.message_id = (SELECT l.id FROM conversations_message l
                                 WHERE l.conversation_id = NEW.conversation_id
                                   AND l."position" < NEW."position" AND {_turn("l")}
                                 ORDER BY l."position" DESC LIMIT 1)
            AND NOT EXISTS (SELECT 1 FROM conversations_message r
                             WHERE r.tool_call_id = c.id AND r."position" < NEW."position")
         UNION ALL
         SELECT c.id, c.call_id FROM conversations_message a
           JOIN conversations_toolcall c ON c.message_id = a.id
          WHERE a.conversation_id = NEW.conversation_id
            AND a."position" > NEW."position" AND {_turn("a")})""",
    "a user, system or assistant message cannot follow unanswered tool calls",
)

MESSAGE_IMMUTABLE = _refusal(
    "conversations_message_immutable",
    'BEFORE UPDATE OF conversation_id, "position", role, tool_call_id',
    "conversations_message",
    """NEW.conversation_id IS NOT OLD.conversation_id OR NEW."position" IS NOT OLD."position"
     OR NEW.role IS NOT OLD.role OR NEW.tool_call_id IS NOT OLD.tool_call_id""",
    "the conversation, position, role and tool call of a message cannot change",
)

# Attachments -------------------------------------------------------------------------------
# A message references only attachments its conversation's owner owns; once stored, a
# link and an attachment's owner and content never change, so the check stays true.

MESSAGEATTACHMENT_SAME_OWNER = _refusal(
    "conversations_messageattachment_same_owner",
    "BEFORE INSERT",
    "conversations_messageattachment",
    """NOT EXISTS (SELECT 1 FROM conversations_message m
                 JOIN conversations_conversation c ON c.id = m.conversation_id
                 JOIN conversations_attachment a ON a.owner_id = c.owner_id
                WHERE m.id = NEW.message_id AND a.id = NEW.attachment_id)""",
    "an attachment must belong to the owner of the conversation",
)

MESSAGEATTACHMENT_IMMUTABLE = _refusal(
    "conversations_messageattachment_immutable",
    'BEFORE UPDATE OF message_id, attachment_id, "position"',
    "conversations_messageattachment",
    """NEW.message_id IS NOT OLD.message_id OR NEW.attachment_id IS NOT OLD.attachment_id
     OR NEW."position" IS NOT OLD."position"
    """,
    "the message, attachment and position of an attachment link cannot change",
)

ATTACHMENT_IMMUTABLE = _refusal(
    "conversations_attachment_immutable",
    "BEFORE UPDATE OF owner_id, sha256, media_type, size",
    "conversations_attachment",
    """NEW.owner_id IS NOT OLD.owner_id OR NEW.sha256 IS NOT OLD.sha256
     OR NEW.media_type IS NOT OLD.media_type OR NEW.size IS NOT OLD.size""",
    "the owner and content of an attachment cannot change",
)

# Approvals ---------------------------------------------------------------------------------

TOOLCALL_APPROVAL_REQUIRED = _refusal(
    "conversations_toolcall_approval_required",
    "BEFORE UPDATE OF status",
    "conversations_toolcall",
    """NEW.status IN ('running', 'succeeded') AND EXISTS (
         SELECT 1 FROM conversations_toolapproval a
          WHERE a.tool_call_id = NEW.id AND a.decision <> 'approved')""",
    "a call needing approval runs only once approved",
)

# Only two things of a decided approval may change: the decider, to NULL when that user
# is deleted, and the reason, to empty when the conversation is redacted.
TOOLAPPROVAL_DECISION_FINAL = _refusal(
    "conversations_toolapproval_decision_final",
    "BEFORE UPDATE",
    "conversations_toolapproval",
    """OLD.decision <> '' AND (NEW.decision IS NOT OLD.decision
         OR (NEW.reason IS NOT OLD.reason AND NEW.reason <> '')
         OR NEW.decided_at IS NOT OLD.decided_at
         OR NEW.arguments_digest IS NOT OLD.arguments_digest
         OR NEW.level IS NOT OLD.level
         OR NEW.tool_call_id IS NOT OLD.tool_call_id
         OR NEW.run_id IS NOT OLD.run_id
         OR NEW.requested_at IS NOT OLD.requested_at
         OR NEW.expires_at IS NOT OLD.expires_at
         OR (NEW.decided_by_id IS NOT NULL AND NEW.decided_by_id IS NOT OLD.decided_by_id))""",
    "a decided approval cannot change",
)

# Agents ------------------------------------------------------------------------------------
# conversations_profile_agents is Profile.agents: (from_profile_id) may call (to_profile_id).
# No edge may close a cycle or make a chain longer than MAX_AGENT_DEPTH; edges never change.

_AGENT_EDGES = "conversations_profile_agents"
_AGENT_CYCLE = f"""(NEW.from_profile_id = NEW.to_profile_id OR EXISTS (
         WITH RECURSIVE reached(id) AS (
             SELECT NEW.to_profile_id
             UNION
             SELECT e.to_profile_id FROM {_AGENT_EDGES} e JOIN reached r ON e.from_profile_id = r.id)
         SELECT 1 FROM reached WHERE id = NEW.from_profile_id))"""

PROFILE_AGENTS_ACYCLIC = _refusal(
    "conversations_profile_agents_acyclic",
    "BEFORE INSERT",
    _AGENT_EDGES,
    _AGENT_CYCLE,
    "a profile cannot reach itself through its agents",
)

PROFILE_AGENTS_DEPTH = _refusal(
    "conversations_profile_agents_depth",
    "BEFORE INSERT",
    _AGENT_EDGES,
    f"""NOT {_AGENT_CYCLE}
     AND (WITH RECURSIVE up(id, depth) AS (
              SELECT NEW.from_profile_id, 0
              UNION ALL
              SELECT e.from_profile_id, u.depth + 1 FROM {_AGENT_EDGES} e JOIN up u ON e.to_profile_id = u.id)
          SELECT max(depth) FROM up)
       + 1
       + (WITH RECURSIVE down(id, depth) AS (
              SELECT NEW.to_profile_id, 0
              UNION ALL
              SELECT e.to_profile_id, d.depth + 1 FROM {_AGENT_EDGES} e JOIN down d ON e.from_profile_id = d.id)
          SELECT max(depth) FROM down) > {AGENT_DEPTH_MARK}""",
    f"a chain of agents cannot be longer than MAX_AGENT_DEPTH ({AGENT_DEPTH_MARK})",
)

PROFILE_AGENTS_IMMUTABLE = _refusal(
    "conversations_profile_agents_immutable",
    "BEFORE UPDATE",
    _AGENT_EDGES,
    "NEW.from_profile_id IS NOT OLD.from_profile_id OR NEW.to_profile_id IS NOT OLD.to_profile_id",
    "the edges of the agent graph cannot change",
)

# The search index --------------------------------------------------------------------------
# conversations_message_fts (FTS5, rowid = the message's id) holds what a message
# is found by: its content, the name of the call it answers, then the name and the
# string and number values of the arguments of each call it makes.


def words_of_call(call: str) -> str:
    """A call's name and the string and number values of its arguments (not the keys)."""
    return (
        f"{call}.name || ' ' || coalesce((SELECT group_concat(j.atom, ' ')"
        f" FROM json_tree({call}.arguments) j WHERE j.type IN ('text', 'integer', 'real')), '')"
    )


MESSAGE_DOCUMENT: Final = (
    "m.content || ' ' || coalesce((SELECT a.name FROM conversations_toolcall a"
    " WHERE a.id = m.tool_call_id), '') || ' ' || "
    f"coalesce((SELECT group_concat({words_of_call('c')}, ' ')"
    " FROM conversations_toolcall c WHERE c.message_id = m.id), '')"
)
"""The document of the message ``m``; ``search_index`` fills the table with it too."""


def _index(message: str) -> str:
    return (
        "INSERT INTO conversations_message_fts(rowid, document)"
        f" SELECT m.id, {MESSAGE_DOCUMENT} FROM conversations_message m WHERE m.id = {message};"
    )


def _reindex(message: str) -> str:
    return f"DELETE FROM conversations_message_fts WHERE rowid = {message}; {_index(message)}"


def _upkeep(name: str, event: str, table: str, body: str) -> Rule:
    sql = f"CREATE TRIGGER {name} {event} ON {table} FOR EACH ROW BEGIN {body} END;"
    return Rule(name, table, (sql,), search_index=True)


MESSAGE_SEARCH_INSERT = _upkeep(
    "conversations_message_search_insert",
    "AFTER INSERT",
    "conversations_message",
    _index("NEW.id"),
)
MESSAGE_SEARCH_UPDATE = _upkeep(
    "conversations_message_search_update",
    "AFTER UPDATE OF content",
    "conversations_message",
    _reindex("NEW.id"),
)
MESSAGE_SEARCH_DELETE = _upkeep(
    "conversations_message_search_delete",
    "AFTER DELETE",
    "conversations_message",
    "DELETE FROM conversations_message_fts WHERE rowid = OLD.id;",
)
# No statement-level triggers: instead of reading every call of the message
# again for each inserted call, a call appends its own words to the document,
# which ends with the words of the message's calls in the order they were stored.
TOOLCALL_SEARCH_INSERT = _upkeep(
    "conversations_toolcall_search_insert",
    "AFTER INSERT",
    "conversations_toolcall",
    "UPDATE conversations_message_fts"
    f" SET document = document || ' ' || {words_of_call('NEW')} WHERE rowid = NEW.message_id;",
)
TOOLCALL_SEARCH_UPDATE = _upkeep(
    "conversations_toolcall_search_update",
    "AFTER UPDATE OF name, arguments",
    "conversations_toolcall",
    _reindex("NEW.message_id"),
)

RULES: Final = (
    TOOLCALL_ASSISTANT_MESSAGE,
    TOOLCALL_CONVERSATION_MATCH,
    TOOLCALL_NO_ORPHANS,
    TOOLCALL_IMMUTABLE,
    MESSAGE_ANSWER_PAIRING,
    MESSAGE_NO_ORPHANS,
    MESSAGE_IMMUTABLE,
    TOOLCALL_APPROVAL_REQUIRED,
    TOOLAPPROVAL_DECISION_FINAL,
    PROFILE_AGENTS_ACYCLIC,
    PROFILE_AGENTS_DEPTH,
    PROFILE_AGENTS_IMMUTABLE,
    MESSAGEATTACHMENT_SAME_OWNER,
    MESSAGEATTACHMENT_IMMUTABLE,
    ATTACHMENT_IMMUTABLE,
    MESSAGE_SEARCH_INSERT,
    MESSAGE_SEARCH_UPDATE,
    MESSAGE_SEARCH_DELETE,
    TOOLCALL_SEARCH_INSERT,
    TOOLCALL_SEARCH_UPDATE,
)
