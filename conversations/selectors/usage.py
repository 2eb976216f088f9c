"""Reads of the usage ledger: totals of model calls grouped by day, model, profile or user."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import Coalesce, TruncDate

from conversations.domain import USAGE_FIELDS
from conversations.models import ModelCall

__all__ = ["GROUPINGS", "UsageRow", "usage_calls", "usage_totals"]

GROUPINGS = ("day", "model", "profile", "user")
"""What totals can be grouped by."""


@dataclass(frozen=True, slots=True)
class UsageRow:
    """The totals of one group of model calls (or of all of them: ``key`` is ``None``)."""

    key: str | None
    """The day (ISO date), model, profile slug or username; ``None`` for the grand total."""
    calls: int
    """Requests sent to a provider, failed ones included."""
    failed_calls: int
    """Of which failed."""
    unpriced_calls: int
    """Of which had no known price (their cost is not in ``cost``)."""
    estimated_calls: int
    """Of which had estimated tokens (the provider reported none); they are in the totals."""
    prompt_tokens: int
    """Input tokens, cached ones included."""
    cached_prompt_tokens: int
    """The cached part of ``prompt_tokens``."""
    completion_tokens: int
    """Output tokens, reasoning included."""
    reasoning_tokens: int
    """The reasoning part of ``completion_tokens``."""
    cost: Decimal | None
    """Sum of the priced calls' costs; ``None`` when none was priced."""
    ref: Any = None
    """The grouped object's id (profile or user pk) where there is one, for links."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def cache_hit_rate(self) -> float | None:
        """The share of input tokens read from the provider's prompt cache (``None``: no input)."""
        if not self.prompt_tokens:
            return None
        return self.cached_prompt_tokens / self.prompt_tokens


def usage_calls(
    *, user: Any | None, since: date | None = None, until: date | None = None
) -> QuerySet[ModelCall]:
    """Model calls of ``user`` (``None``: everyone's) started on ``since`` .. ``until`` (UTC days)."""
    calls = ModelCall.objects.all()
    if user is not None:
        calls = calls.filter(user=user)
    if since is not None:
        calls = calls.filter(started_at__gte=datetime.combine(since, time.min, tzinfo=UTC))
    if until is not None:
        end = datetime.combine(until + timedelta(days=1), time.min, tzinfo=UTC)
        calls = calls.filter(started_at__lt=end)
    return calls


_LEDGER_COUNTS = tuple(name for name in USAGE_FIELDS if name != "total_tokens")
"""The counts a ledger row stores: all of ``Usage``'s but the total, which is their sum."""

_KEYS = {
    "day": TruncDate("started_at", tzinfo=UTC),
    "model": F("model"),
    "profile": F("profile__slug"),
    "user": F("user__username"),
}
_REFS = {"day": None, "model": None, "profile": "profile_id", "user": "user_id"}


def _aggregates() -> dict[str, Any]:
    zero: dict[str, Any] = {}
    for name in _LEDGER_COUNTS:
        zero[name] = Coalesce(Sum(name), 0)
    return {
        "calls": Count("pk"),
        "failed_calls": Count("pk", filter=Q(status=ModelCall.Status.ERROR)),
        "unpriced_calls": Count("pk", filter=Q(cost__isnull=True)),
        "estimated_calls": Count("pk", filter=Q(estimated=True)),
        "cost": Sum("cost"),
        **zero,
    }


def _row(key: Any, values: dict[str, Any], ref: Any = None) -> UsageRow:
    return UsageRow(
        key=None if key is None else (key.isoformat() if isinstance(key, date) else str(key)),
        calls=values["calls"],
        failed_calls=values["failed_calls"],
        unpriced_calls=values["unpriced_calls"],
        estimated_calls=values["estimated_calls"],
        prompt_tokens=values["prompt_tokens"],
        cached_prompt_tokens=values["cached_prompt_tokens"],
        completion_tokens=values["completion_tokens"],
        reasoning_tokens=values["reasoning_tokens"],
        cost=values["cost"],
        ref=ref,
    )


def usage_totals(
    *, calls: QuerySet[ModelCall], group_by: str, order_by_cost: bool = False
) -> tuple[UsageRow, list[UsageRow]]:
    """The grand total of ``calls`` and one row per group, in two queries.

    Groups are in key order, or costliest first (then most tokens) with
    ``order_by_cost``.
    """
    if group_by not in GROUPINGS:
        raise ValueError(f"group_by must be one of {', '.join(GROUPINGS)}, not {group_by!r}")
    total = _row(None, calls.aggregate(**_aggregates()))
    ref = _REFS[group_by]
    columns = ["key", ref] if ref else ["key"]
    grouped = (
        calls.order_by().annotate(key=_KEYS[group_by]).values(*columns).annotate(**_aggregates())
    )
    rows = [_row(values["key"], values, values.get(ref) if ref else None) for values in grouped]
    if order_by_cost:
        rows.sort(key=lambda row: (-(row.cost or 0), -row.total_tokens, row.key or ""))
    else:
        rows.sort(key=lambda row: row.key or "")
    return total, rows
