"""Judgements on the record: users' feedback, scores, and datasets made of rated conversations.

``judgements`` records feedback (one row per user and target, upserted) and
scores. It reads and writes its own tables only, so it sits beside the
other use cases over whole conversations, above the loop.
"""

from .judgements import (
    MAX_COMMENT_LENGTH,
    FeedbackTarget,
    ScoreTarget,
    add_score,
    clear_feedback,
    set_feedback,
)

__all__ = [
    "MAX_COMMENT_LENGTH",
    "FeedbackTarget",
    "ScoreTarget",
    "add_score",
    "clear_feedback",
    "set_feedback",
]
