"""Judgements on the record: users' feedback, scores, and datasets made of rated conversations.

``judgements`` records feedback (one row per user and target, upserted) and
scores; ``datasets`` turns rated conversations into fine-tuning lines and
preference pairs. It reads and writes its own tables only, so it sits beside the
other use cases over whole conversations, above the loop.
"""

from .datasets import (
    DATASET_FORMATS,
    RATINGS,
    DatasetQuery,
    dataset_conversations,
    dataset_lines,
)
from .judgements import (
    MAX_COMMENT_LENGTH,
    FeedbackTarget,
    ScoreTarget,
    add_score,
    clear_feedback,
    set_feedback,
)

__all__ = [
    "DATASET_FORMATS",
    "MAX_COMMENT_LENGTH",
    "RATINGS",
    "DatasetQuery",
    "FeedbackTarget",
    "ScoreTarget",
    "add_score",
    "clear_feedback",
    "dataset_conversations",
    "dataset_lines",
    "set_feedback",
]
