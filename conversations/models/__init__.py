"""The app's tables: configuration records and the conversation transcript.

Models hold shape and constraints, not behaviour. Every rule the database can
check on one row is a named ``CheckConstraint``/``UniqueConstraint`` here (both
SQLite and PostgreSQL enforce them); the rules that need other rows are
triggers, whose current SQL for each database is in ``rules`` (the migrations
install it). ``docs/data-model.md`` lists each of the ten conversation rules
and what enforces it on each database.

Once inserted, a message's conversation, position, role and tool call, and a
call's message and conversation, never change (a trigger refuses it): the
cross-row rules are checked on insert and stay true that way.

Split by concern: ``constraints`` (the expressions the checks are built
from), ``config`` (providers, language models, profiles, tool switches) and
``transcript`` (conversations, messages, tool calls, runs) and ``usage``
(the model-call ledger, budgets and their per-period counters) and ``context``
(summaries of the turns a context window's view leaves out) and ``mcp``
(MCP servers, the tools they list, calls of ours over MCP) and ``output``
(the JSON Schemas of structured output), ``provider_tools`` (the calls of
tools a provider ran itself, and the citations of an answer),
``feedback`` (users' feedback, scores, evaluations) and ``attachments`` (files
stored once per owner and the messages' references to them). Every model is
importable from here, which is also where migrations find ``JSONTypeOf``;
``rules`` holds no model and is imported as ``conversations.models.rules``.
"""

from .approvals import ApprovalDecision, ApprovalLevel, ToolApproval
from .attachments import (
    ATTACHMENT_NAME_MAX_LENGTH,
    Attachment,
    MessageAttachment,
    attachment_storage,
)
from .config import (
    ApprovalPolicy,
    ContextStrategy,
    LanguageModel,
    Profile,
    Provider,
    ToolSetting,
)
from .constraints import JSONTypeOf
from .context import ContextSummary
from .feedback import MAX_TAG_LENGTH, MAX_TAGS, Evaluation, Feedback, Score, ScoreSource
from .mcp import MCPCall, MCPServer, MCPTool, MCPTransport
from .output import OutputSchema
from .provider_tools import Citation, ProviderToolCall, ProviderToolKind
from .transcript import (
    BUSY_RUN_STATUSES,
    TITLE_MAX_LENGTH,
    Conversation,
    ConversationKind,
    Message,
    Run,
    RunStatus,
    ToolCall,
    ToolCallStatus,
)
from .usage import Budget, BudgetCounter, ModelCall

__all__ = [
    "ATTACHMENT_NAME_MAX_LENGTH",
    "BUSY_RUN_STATUSES",
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "TITLE_MAX_LENGTH",
    "ApprovalDecision",
    "ApprovalLevel",
    "ApprovalPolicy",
    "Attachment",
    "Budget",
    "BudgetCounter",
    "Citation",
    "ContextStrategy",
    "ContextSummary",
    "Conversation",
    "ConversationKind",
    "Evaluation",
    "Feedback",
    "JSONTypeOf",
    "LanguageModel",
    "MCPCall",
    "MCPServer",
    "MCPTool",
    "MCPTransport",
    "Message",
    "MessageAttachment",
    "ModelCall",
    "OutputSchema",
    "Profile",
    "Provider",
    "ProviderToolCall",
    "ProviderToolKind",
    "Run",
    "RunStatus",
    "Score",
    "ScoreSource",
    "ToolApproval",
    "ToolCall",
    "ToolCallStatus",
    "ToolSetting",
    "attachment_storage",
]
