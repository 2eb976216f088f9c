"""Deciding tool call approvals: by a reviewer, or by expiry, and resuming the run.

The policy (which calls need a decision) and holding a turn for one are steps
of the loop (``services.loop.approvals``); this package is what comes after:
storing a decision and resuming the run once its last pending approval is
decided. The policy's names are re-exported for the admin and the MCP server.
"""

from ..loop.approvals import (
    approval_levels,
    approval_required,
    arguments_digest,
    resolve_approval_level,
)
from .decisions import Decision, can_decide, decide_approval, expire_approvals

__all__ = [
    "Decision",
    "approval_levels",
    "approval_required",
    "arguments_digest",
    "can_decide",
    "decide_approval",
    "expire_approvals",
    "resolve_approval_level",
]
