"""The app's admin: the stored history read-only, the configuration records editable.

``history`` registers conversations and runs, ``records`` single tool calls
and messages (view-only, actions through services); ``config`` registers
providers, language models, profiles and the tool switches; ``approvals`` is
the inbox of tool calls waiting for a human decision; ``usage`` the
model-call ledger, budgets and the usage page; ``mcp`` the MCP servers and
their synced tools; ``outputs`` the output schemas with the runs that used them;
``feedback`` users' feedback, scores and evaluations; ``attachments`` the
stored files, with their bytes for staff.
"""

from . import approvals, attachments, config, feedback, history, mcp, outputs, records, usage

__all__ = [
    "approvals",
    "attachments",
    "config",
    "feedback",
    "history",
    "mcp",
    "outputs",
    "records",
    "usage",
]
