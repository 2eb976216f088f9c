"""The triggers and PL/pgSQL functions of PostgreSQL: grammar, approvals, attachments, search.

Every refusal raises ``check_violation`` (SQLSTATE class 23) naming the rule
as its constraint, which Django raises as ``django.db.IntegrityError``. The
grammar's insert checks are statement-level over the inserted rows
(``REFERENCING NEW TABLE``): a turn's k calls or k answers are checked by one
query per rule, and the error is about the first offending row. The rule-8
checks first lock the conversation row (``FOR NO KEY UPDATE``, the lock
``append_messages`` takes too), so two concurrent writers cannot each miss
the other's uncommitted row. ``plan_cache_mode = force_custom_plan`` makes a
function plan its queries with their actual values instead of keeping a
generic plan made while the tables were small. docs/data-model.md tells
which rule is which; the ADRs 0002, 0006, 0008, 0013 and 0016 tell why.
"""

from __future__ import annotations

from typing import Final

from . import AGENT_DEPTH_MARK, SEARCH_CONFIG_MARK, Rule
from .plpgsql import _check, _function, _immutable, _refusal, _refused_if_found

CONFIG = f"'{SEARCH_CONFIG_MARK}'::regconfig"


# The grammar: calls ------------------------------------------------------------------------

TOOLCALL_ASSISTANT_MESSAGE = _check(
    "conversations_toolcall_assistant_message",
    "conversations_toolcall",
    "new_calls",
    """
    SELECT n.call_id INTO bad FROM new_calls n
     WHERE NOT EXISTS (SELECT 1 FROM conversations_message m
                        WHERE m.id = n.message_id AND m.role = 'assistant')
     ORDER BY n.id LIMIT 1;
""",
    ("tool call % must belong to an assistant message", "bad"),
    declare="    bad text;",
)

TOOLCALL_CONVERSATION_MATCH = _check(
    "conversations_toolcall_conversation_match",
    "conversations_toolcall",
    "new_calls",
    """
    SELECT n.call_id INTO bad FROM new_calls n
     WHERE NOT EXISTS (SELECT 1 FROM conversations_message m
                        WHERE m.id = n.message_id
                          AND m.conversation_id = n.conversation_id)
     ORDER BY n.id LIMIT 1;
""",
    ("tool call % must be in the conversation of its message", "bad"),
    declare="    bad text;",
)

# Rule 8: a call may join an assistant turn only while no user, system or assistant
# message follows it; the next such message is found through the partial index
# conversations_message_turn_idx, whose condition the query repeats as written.
TOOLCALL_NO_ORPHANS = _check(
    "conversations_toolcall_no_orphans",
    "conversations_toolcall",
    "new_calls",
    """
    PERFORM 1 FROM conversations_conversation
     WHERE id IN (SELECT conversation_id FROM new_calls) ORDER BY id FOR NO KEY UPDATE;
    SELECT n.call_id INTO bad FROM new_calls n
      JOIN conversations_message own ON own.id = n.message_id
     WHERE EXISTS (SELECT 1 FROM conversations_message later
                    WHERE later.conversation_id = own.conversation_id
                      AND later."position" > own."position" AND NOT (later.role = 'tool'))
     ORDER BY n.id LIMIT 1;
""",
    ("tool call % cannot be added to an assistant turn that later messages follow", "bad"),
    declare="    bad text;",
)

TOOLCALL_IMMUTABLE = _immutable(
    "conversations_toolcall_immutable",
    "conversations_toolcall",
    ("message_id", "conversation_id"),
    "the message and conversation of tool call % cannot change",
    "OLD.call_id",
)

# The grammar: messages ---------------------------------------------------------------------

MESSAGE_ANSWER_PAIRING = _check(
    "conversations_message_answer_pairing",
    "conversations_message",
    "new_messages",
    """
    PERFORM 1 FROM new_messages n
      LEFT JOIN conversations_toolcall c ON c.id = n.tool_call_id
      LEFT JOIN conversations_message m ON m.id = c.message_id
     WHERE n.tool_call_id IS NOT NULL
       AND (c.id IS NULL OR c.conversation_id <> n.conversation_id
            OR m."position" >= n."position")
     LIMIT 1;
""",
    ("a tool message must answer a call of its conversation made before it",),
)

# Rule 8 for a new message n: every earlier non-tool message was checked when it
# was stored, so only the calls of the last turn before n can be open (or a call
# made after n). Their answers can only lie between that turn and n: the range
# bounds what the query reads whichever join the planner picks (ADR 0016).
MESSAGE_NO_ORPHANS = _check(
    "conversations_message_no_orphans",
    "conversations_message",
    "new_messages",
    """
    PERFORM 1 FROM conversations_conversation
     WHERE id IN (SELECT conversation_id FROM new_messages WHERE role <> 'tool')
     ORDER BY id FOR NO KEY UPDATE;
    SELECT n.role, pending.calls INTO bad_role, open_calls FROM new_messages n
      CROSS JOIN LATERAL (
        SELECT string_agg(o.call_id, ', ' ORDER BY o.id) AS calls
          FROM (SELECT c.id, c.call_id FROM conversations_toolcall c
                 WHERE c.message_id = (SELECT l.id FROM conversations_message l
                                        WHERE l.conversation_id = n.conversation_id
                                          AND l."position" < n."position"
                                          AND NOT (l.role = 'tool')
                                        ORDER BY l."position" DESC LIMIT 1)
                   AND NOT EXISTS (
                       SELECT 1 FROM conversations_message r
                        WHERE r.conversation_id = n.conversation_id
                          AND r."position" > (SELECT l."position" FROM conversations_message l
                                               WHERE l.conversation_id = n.conversation_id
                                                 AND l."position" < n."position"
                                                 AND NOT (l.role = 'tool')
                                               ORDER BY l."position" DESC LIMIT 1)
                          AND r."position" < n."position"
                          AND r.tool_call_id = c.id)
                UNION ALL
                SELECT c.id, c.call_id FROM conversations_message a
                  JOIN conversations_toolcall c ON c.message_id = a.id
                 WHERE a.conversation_id = n.conversation_id
                   AND a."position" > n."position" AND NOT (a.role = 'tool')) o
      ) pending
     WHERE n.role <> 'tool' AND pending.calls IS NOT NULL
     ORDER BY n."position" LIMIT 1;
""",
    ("a % message cannot follow unanswered tool calls: %", "bad_role", "open_calls"),
    declare="    bad_role text;\n    open_calls text;",
)

MESSAGE_IMMUTABLE = _immutable(
    "conversations_message_immutable",
    "conversations_message",
    ("conversation_id", '"position"', "role", "tool_call_id"),
    "the conversation, position, role and tool call of message % cannot change",
    "OLD.id",
)

# Deleting an answer is checked at commit (deferred), so deleting a whole
# conversation or a history tail passes in any row order. SQLite has no
# deferred triggers: there the application is responsible.
MESSAGE_ANSWER_KEPT = Rule(
    "conversations_message_answer_kept",
    "conversations_message",
    (
        _function(
            "conversations_message_answer_kept",
            """
    PERFORM 1 FROM conversations_conversation WHERE id = OLD.conversation_id FOR NO KEY UPDATE;
    SELECT c.call_id INTO open_call
      FROM conversations_toolcall c
      JOIN conversations_message a ON a.id = c.message_id
     WHERE c.id = OLD.tool_call_id
       AND NOT EXISTS (SELECT 1 FROM conversations_message r
                        WHERE r.tool_call_id = c.id)
       AND EXISTS (SELECT 1 FROM conversations_message later
                    WHERE later.conversation_id = a.conversation_id
                      AND later."position" > a."position"
                      AND later.role <> 'tool');
"""
            + _refused_if_found(
                "conversations_message_answer_kept",
                "deleting the answer to tool call % would leave it unanswered"
                " before later messages",
                "open_call",
            ),
            declare="    open_call text;",
        ),
        """
CREATE CONSTRAINT TRIGGER conversations_message_answer_kept
AFTER DELETE ON conversations_message DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (OLD.tool_call_id IS NOT NULL)
EXECUTE FUNCTION conversations_message_answer_kept();""",
    ),
)

# Approvals ---------------------------------------------------------------------------------

TOOLCALL_APPROVAL_REQUIRED = Rule(
    "conversations_toolcall_approval_required",
    "conversations_toolcall",
    (
        _function(
            "conversations_toolcall_approval_required",
            """
    IF NEW.status IN ('running', 'succeeded') AND EXISTS (
        SELECT 1 FROM conversations_toolapproval a
         WHERE a.tool_call_id = NEW.id AND a.decision <> 'approved') THEN
        """
            + _refusal(
                "conversations_toolcall_approval_required",
                "tool call % has no granted approval",
                "NEW.call_id",
            )
            + "\n    END IF;\n    RETURN NEW;",
            custom_plans=False,
        ),
        """
CREATE TRIGGER conversations_toolcall_approval_required
BEFORE UPDATE OF status ON conversations_toolcall FOR EACH ROW
EXECUTE FUNCTION conversations_toolcall_approval_required();""",
    ),
)

# Only two things of a decided approval may change: the decider, to NULL when that user
# is deleted, and the reason, to empty when the conversation is redacted.
TOOLAPPROVAL_DECISION_FINAL = Rule(
    "conversations_toolapproval_decision_final",
    "conversations_toolapproval",
    (
        _function(
            "conversations_toolapproval_decision_final",
            """
    IF OLD.decision <> '' AND (NEW.decision IS DISTINCT FROM OLD.decision
        OR (NEW.reason IS DISTINCT FROM OLD.reason AND NEW.reason <> '')
        OR NEW.decided_at IS DISTINCT FROM OLD.decided_at
        OR NEW.arguments_digest IS DISTINCT FROM OLD.arguments_digest
        OR NEW.level IS DISTINCT FROM OLD.level
        OR NEW.tool_call_id IS DISTINCT FROM OLD.tool_call_id
        OR NEW.run_id IS DISTINCT FROM OLD.run_id
        OR NEW.requested_at IS DISTINCT FROM OLD.requested_at
        OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
        OR (NEW.decided_by_id IS NOT NULL AND NEW.decided_by_id IS DISTINCT FROM OLD.decided_by_id))
    THEN
        """
            + _refusal(
                "conversations_toolapproval_decision_final",
                "approval of tool call % is already decided",
                "OLD.tool_call_id",
            )
            + "\n    END IF;\n    RETURN NEW;",
            custom_plans=False,
        ),
        """
CREATE TRIGGER conversations_toolapproval_decision_final
BEFORE UPDATE ON conversations_toolapproval FOR EACH ROW
EXECUTE FUNCTION conversations_toolapproval_decision_final();""",
    ),
)

# Agents (Profile.agents: from_profile_id may call to_profile_id) --------------------------
# A new edge is checked against those there (row by row: an INSERT's earlier rows are
# seen), under a lock that makes edits of the graph take turns; triggers fire in name order.
_EDGES = "conversations_profile_agents"


def _longest(into: str, start: str, near: str, far: str) -> str:
    """``into`` := the edges on the longest chain from ``start`` (``near`` to ``far`` columns)."""
    return f"""
    WITH RECURSIVE chain(id, depth) AS (SELECT {start}, 0
        UNION ALL SELECT e.{far}, c.depth + 1 FROM {_EDGES} e JOIN chain c ON e.{near} = c.id)
    SELECT max(depth) INTO {into} FROM chain;"""


def _agent_rule(name: str, body: str, declare: str = "") -> Rule:
    return Rule(  # a check of each new edge
        name,
        _EDGES,
        (
            _function(name, body + "\n    RETURN NEW;", declare=declare),
            f"CREATE TRIGGER {name} BEFORE INSERT ON {_EDGES} FOR EACH ROW"
            f" EXECUTE FUNCTION {name}();",
        ),
    )


PROFILE_AGENTS_ACYCLIC = _agent_rule(
    "conversations_profile_agents_acyclic",
    f"""
    LOCK TABLE {_EDGES} IN SHARE ROW EXCLUSIVE MODE;
    IF NEW.from_profile_id = NEW.to_profile_id OR EXISTS (
        WITH RECURSIVE reached(id) AS (SELECT NEW.to_profile_id
            UNION SELECT e.to_profile_id FROM {_EDGES} e JOIN reached r ON e.from_profile_id = r.id)
        SELECT 1 FROM reached WHERE id = NEW.from_profile_id) THEN
        {
        _refusal(
            "conversations_profile_agents_acyclic",
            "profile % would reach itself through its agents",
            "NEW.from_profile_id",
        )
    }
    END IF;""",
)

PROFILE_AGENTS_DEPTH = _agent_rule(
    "conversations_profile_agents_depth",
    _longest("above", "NEW.from_profile_id", "to_profile_id", "from_profile_id")
    + _longest("below", "NEW.to_profile_id", "from_profile_id", "to_profile_id")
    + f"""
    IF above + 1 + below > {AGENT_DEPTH_MARK} THEN
        {
        _refusal(
            "conversations_profile_agents_depth",
            f"a chain of % agents is longer than MAX_AGENT_DEPTH ({AGENT_DEPTH_MARK})",
            "above + 1 + below",
        )
    }
    END IF;""",
    declare="    above integer;\n    below integer;",
)

PROFILE_AGENTS_IMMUTABLE = _immutable(
    "conversations_profile_agents_immutable",
    _EDGES,
    ("from_profile_id", "to_profile_id"),
    "the edges of the agent graph cannot change (edge %)",
    "OLD.id",
)

# Attachments -------------------------------------------------------------------------------
# A message references only attachments its conversation's owner owns; once stored, a
# link and an attachment's owner and content never change, so the check stays true.

MESSAGEATTACHMENT_SAME_OWNER = _check(
    "conversations_messageattachment_same_owner",
    "conversations_messageattachment",
    "new_links",
    """
    SELECT n.attachment_id::text INTO bad FROM new_links n
      JOIN conversations_message m ON m.id = n.message_id
      JOIN conversations_conversation c ON c.id = m.conversation_id
      JOIN conversations_attachment a ON a.id = n.attachment_id
     WHERE a.owner_id <> c.owner_id
     ORDER BY n.id LIMIT 1;
""",
    ("attachment % belongs to another owner than the conversation", "bad"),
    declare="    bad text;",
)

MESSAGEATTACHMENT_IMMUTABLE = _immutable(
    "conversations_messageattachment_immutable",
    "conversations_messageattachment",
    ("message_id", "attachment_id", '"position"'),
    "the message, attachment and position of attachment link % cannot change",
    "OLD.id",
)

ATTACHMENT_IMMUTABLE = _immutable(
    "conversations_attachment_immutable",
    "conversations_attachment",
    ("owner_id", "sha256", "media_type", "size"),
    "the owner and content of attachment % cannot change",
    "OLD.id",
)

# The search index --------------------------------------------------------------------------
# conversations_message.search_vector (a tsvector no model declares) holds what a
# message is found by: its content, the name of the call it answers, and the
# names and argument values (strings and numbers, not keys) of the calls it
# makes. The configuration is the one installed; rebuild_search_index changes it.

# STABLE, not IMMUTABLE: it reads the calls of the message.
SEARCH_DOCUMENT = Rule(
    "conversations_search_document",
    "",
    (
        f"""
CREATE OR REPLACE FUNCTION conversations_search_document(body text, answered bigint, message bigint)
RETURNS tsvector LANGUAGE sql STABLE AS $$
SELECT to_tsvector({CONFIG}, coalesce(body, ''))
    || to_tsvector({CONFIG}, coalesce((SELECT c.name FROM conversations_toolcall c
                                        WHERE c.id = answered), ''))
    || (SELECT to_tsvector({CONFIG}, coalesce(string_agg(c.name, ' '), ''))
               || jsonb_to_tsvector({CONFIG}, coalesce(jsonb_agg(c.arguments), '[]'::jsonb),
                                    '["string", "numeric"]')
          FROM conversations_toolcall c WHERE c.message_id = message)
$$;""",
    ),
    search_index=True,
)

MESSAGE_SEARCH = Rule(
    "conversations_message_search",
    "conversations_message",
    (
        """
CREATE OR REPLACE FUNCTION conversations_message_search() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.search_vector := conversations_search_document(NEW.content, NEW.tool_call_id, NEW.id);
    RETURN NEW;
END
$$;""",
        """
CREATE TRIGGER conversations_message_search
BEFORE INSERT OR UPDATE OF content, tool_call_id ON conversations_message
FOR EACH ROW EXECUTE FUNCTION conversations_message_search();""",
    ),
    search_index=True,
)

# A transition table cannot go with a column list: a call whose name or
# arguments change is reindexed row by row (rare).
TOOLCALL_SEARCH = Rule(
    "conversations_toolcall_search",
    "conversations_toolcall",
    (
        """
CREATE OR REPLACE FUNCTION conversations_toolcall_search() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE conversations_message m
       SET search_vector = conversations_search_document(m.content, m.tool_call_id, m.id)
     WHERE m.id = NEW.message_id;
    RETURN NULL;
END
$$;""",
        """
CREATE TRIGGER conversations_toolcall_search
AFTER UPDATE OF name, arguments ON conversations_toolcall
FOR EACH ROW EXECUTE FUNCTION conversations_toolcall_search();""",
    ),
    search_index=True,
)

# The calls of one INSERT, whatever their number: each message once (a turn's
# calls are one statement for one message). One primary key lookup per message,
# planned with its id: one UPDATE joined to the transition table could keep a
# plan made for another size.
TOOLCALL_SEARCH_INSERT = Rule(
    "conversations_toolcall_search_insert",
    "conversations_toolcall",
    (
        """
CREATE OR REPLACE FUNCTION conversations_toolcall_search_insert() RETURNS trigger
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    message bigint;
BEGIN
    FOR message IN SELECT DISTINCT message_id FROM new_calls LOOP
        UPDATE conversations_message m
           SET search_vector = conversations_search_document(m.content, m.tool_call_id, m.id)
         WHERE m.id = message;
    END LOOP;
    RETURN NULL;
END
$$;""",
        "CREATE TRIGGER conversations_toolcall_search_insert AFTER INSERT ON conversations_toolcall"
        " REFERENCING NEW TABLE AS new_calls"
        " FOR EACH STATEMENT EXECUTE FUNCTION conversations_toolcall_search_insert();",
    ),
    search_index=True,
)

RULES: Final = (
    TOOLCALL_ASSISTANT_MESSAGE,
    TOOLCALL_CONVERSATION_MATCH,
    TOOLCALL_NO_ORPHANS,
    TOOLCALL_IMMUTABLE,
    MESSAGE_ANSWER_PAIRING,
    MESSAGE_NO_ORPHANS,
    MESSAGE_IMMUTABLE,
    MESSAGE_ANSWER_KEPT,
    TOOLCALL_APPROVAL_REQUIRED,
    TOOLAPPROVAL_DECISION_FINAL,
    PROFILE_AGENTS_ACYCLIC,
    PROFILE_AGENTS_DEPTH,
    PROFILE_AGENTS_IMMUTABLE,
    MESSAGEATTACHMENT_SAME_OWNER,
    MESSAGEATTACHMENT_IMMUTABLE,
    ATTACHMENT_IMMUTABLE,
    SEARCH_DOCUMENT,
    MESSAGE_SEARCH,
    TOOLCALL_SEARCH,
    TOOLCALL_SEARCH_INSERT,
)
