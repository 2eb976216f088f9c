"""Users' feedback (thumbs on an answer, a tool call or a run) and scores, written once each."""

from __future__ import annotations

import math
from typing import Any, Final

from django.db import IntegrityError, transaction

from conversations.exceptions import InvalidArgumentError
from conversations.models import (
    MAX_TAG_LENGTH,
    MAX_TAGS,
    Evaluation,
    Feedback,
    Message,
    Run,
    Score,
    ScoreSource,
    ToolCall,
)

__all__ = [
    "MAX_COMMENT_LENGTH",
    "FeedbackTarget",
    "ScoreTarget",
    "add_score",
    "clear_feedback",
    "set_feedback",
]

MAX_COMMENT_LENGTH: Final = 2000
"""The longest feedback or score comment, in characters."""

FeedbackTarget = Message | ToolCall | Run
"""What feedback may judge: an assistant message, a tool call or a run."""

ScoreTarget = Message | Run
"""What a score may judge: a run or one of its messages."""


def _target_column(target: FeedbackTarget) -> dict[str, Any]:
    if isinstance(target, Message):
        if target.role != Message.Role.ASSISTANT:
            raise InvalidArgumentError(
                f"feedback judges an assistant's answer; the message at position "
                f"{target.position} is a {target.role} message",
                code="not_an_answer",
            )
        return {"message": target}
    if isinstance(target, ToolCall):
        return {"tool_call": target}
    if isinstance(target, Run):
        return {"run": target}
    raise TypeError(f"feedback cannot judge a {type(target).__name__}")


def _check_comment(comment: Any, field: str = "comment") -> str:
    if not isinstance(comment, str):
        raise InvalidArgumentError(f"{field} must be text", code="invalid_comment", field=field)
    if len(comment) > MAX_COMMENT_LENGTH:
        raise InvalidArgumentError(
            f"{field} is longer than {MAX_COMMENT_LENGTH} characters",
            code="invalid_comment",
            field=field,
        )
    return comment.strip()


def _check_tags(tags: Any) -> list[str]:
    if not isinstance(tags, list | tuple):
        raise InvalidArgumentError(
            "tags must be a list of strings", code="invalid_tags", field="tags"
        )
    if len(tags) > MAX_TAGS:
        raise InvalidArgumentError(
            f"at most {MAX_TAGS} tags, got {len(tags)}", code="invalid_tags", field="tags"
        )
    kept: list[str] = []
    for index, tag in enumerate(tags):
        if not isinstance(tag, str) or not tag.strip() or len(tag.strip()) > MAX_TAG_LENGTH:
            raise InvalidArgumentError(
                f"a tag is a non-empty string of at most {MAX_TAG_LENGTH} characters",
                code="invalid_tags",
                field=f"tags/{index}",
            )
        if tag.strip() not in kept:
            kept.append(tag.strip())
    return kept


def set_feedback(
    *,
    user: Any,
    target: FeedbackTarget,
    value: int,
    comment: str = "",
    tags: list[str] | tuple[str, ...] = (),
) -> tuple[Feedback, bool]:
    """Record ``user``'s ``value`` (+1 or -1) on ``target``; return the row and whether it is new.

    One row per user and target: a second call replaces value, comment and
    tags. The caller checks that ``user`` may see ``target``. Raises
    :class:`InvalidArgumentError` for a message that is not an assistant's
    (``not_an_answer``) and for a bad value, comment or tag (naming the field).
    """
    column = _target_column(target)
    if isinstance(value, bool) or value not in (1, -1):
        raise InvalidArgumentError(
            f"value must be 1 (up) or -1 (down), got {value!r}", code="invalid_value", field="value"
        )
    fields = {"value": value, "comment": _check_comment(comment), "tags": _check_tags(tags)}
    for _attempt in range(2):
        try:
            with transaction.atomic():
                row, created = Feedback.objects.select_for_update().update_or_create(
                    user=user, **column, defaults=fields
                )
            return row, created
        except IntegrityError:
            # Another request created the row between our read and our insert.
            continue
    row = Feedback.objects.get(user=user, **column)
    return row, False


def clear_feedback(*, user: Any, target: FeedbackTarget) -> bool:
    """Delete ``user``'s feedback on ``target``; whether there was one."""
    column = _target_column(target)
    deleted, _ = Feedback.objects.filter(user=user, **column).delete()
    return deleted > 0


def _score_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"value_bool": value}
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise InvalidArgumentError(
                "a number score must be finite", code="invalid_score", field="value"
            )
        return {"value_number": float(value)}
    if isinstance(value, str) and value.strip() and len(value.strip()) <= 100:
        return {"value_label": value.strip()}
    raise InvalidArgumentError(
        "value must be a number, a boolean or a label of 1 to 100 characters",
        code="invalid_score",
        field="value",
    )


def add_score(
    *,
    target: ScoreTarget,
    name: str,
    value: float | bool | str,
    source: str,
    comment: str = "",
    evaluation: Evaluation | None = None,
    created_by: Any = None,
) -> Score:
    """Store one score of ``target``: a number, a boolean or a label under ``name``.

    Raises :class:`InvalidArgumentError` for an empty or long name, an
    unknown source, or a value of none of the three kinds.
    """
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > 100:
        raise InvalidArgumentError(
            "name must be 1 to 100 characters", code="invalid_score_name", field="name"
        )
    if source not in ScoreSource.values:
        raise InvalidArgumentError(
            f"source must be one of {', '.join(ScoreSource.values)}, got {source!r}",
            code="invalid_score_source",
            field="source",
        )
    if isinstance(target, Message):
        column: dict[str, Any] = {"message": target}
    elif isinstance(target, Run):
        column = {"run": target}
    else:
        raise TypeError(f"a score cannot judge a {type(target).__name__}")
    return Score.objects.create(
        **column,
        **_score_value(value),
        name=name.strip(),
        source=source,
        comment=_check_comment(comment),
        evaluation=evaluation,
        created_by=created_by if created_by is not None and created_by.is_authenticated else None,
    )
