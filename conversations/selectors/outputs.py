"""Structured outputs as the API lists them: a user's outputs by schema, the schemas they used."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.db.models import Count, Max, QuerySet

from conversations.models import OutputSchema, Run

__all__ = ["owned_output_schemas", "owned_outputs"]


def owned_outputs(
    *, user: Any, sha256: str | None = None, start: date | None = None, end: date | None = None
) -> QuerySet[Run]:
    """The user's runs that produced an output (under ``sha256`` when given), days inclusive.

    Only the user's own conversations: another user's schema digest simply
    matches none of them.
    """
    runs = Run.objects.filter(
        conversation__owner=user, output_schema__isnull=False, output__isnull=False
    )
    if sha256 is not None:
        runs = runs.filter(output_schema__sha256=sha256)
    if start is not None:
        runs = runs.filter(started_at__date__gte=start)
    if end is not None:
        runs = runs.filter(started_at__date__lte=end)
    return runs.select_related("output_schema").only(
        "id",
        "conversation_id",
        "started_at",
        "finished_at",
        "output",
        "output_schema__sha256",
        "output_schema__name",
    )


def owned_output_schemas(*, user: Any) -> QuerySet[OutputSchema]:
    """The schemas the user's runs were asked to answer in, with how often and when last."""
    return (
        OutputSchema.objects.filter(runs__conversation__owner=user)
        .annotate(runs_count=Count("runs"), last_used_at=Max("runs__started_at"))
        .order_by("-created_at", "-id")
    )
