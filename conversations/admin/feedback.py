"""Feedback, scores and evaluations in the admin: read-only, filtered by value, tag and source."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest

from conversations.models import Evaluation, Feedback, Score

from .display import ReadOnlyAdmin, object_link, pretty_json

__all__ = ["EvaluationAdmin", "FeedbackAdmin", "ScoreAdmin", "TagFilter"]


class TagFilter(admin.SimpleListFilter):
    """Feedback carrying one tag (the most used fifty are offered)."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        counts: dict[str, int] = {}
        for tags in Feedback.objects.exclude(tags=[]).values_list("tags", flat=True)[:5000]:
            for tag in tags if isinstance(tags, list) else ():
                counts[str(tag)] = counts.get(str(tag), 0) + 1
        common = sorted(counts, key=lambda tag: (-counts[tag], tag))[:50]
        return [(tag, tag) for tag in common]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        tag = self.value()
        if not tag:
            return queryset
        # The list as JSON text holds the tag as a quoted string on both databases
        # (SQLite has no JSON containment lookup).
        found: QuerySet[Any] = queryset.annotate(tags_text=Cast("tags", TextField())).filter(
            tags_text__contains=json.dumps(tag)
        )
        return found


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyAdmin):
    """Users' thumbs on answers, tool calls and runs."""

    list_display = ("value", "target", "user", "tag_list", "comment", "updated_at")
    list_filter = ("value", TagFilter)
    list_select_related = ("user", "message", "tool_call", "run")
    search_fields = ("comment",)
    readonly_fields = (
        "user",
        "value",
        "target",
        "comment",
        "tag_list",
        "created_at",
        "updated_at",
    )
    fields = readonly_fields

    @admin.display(description="target")
    def target(self, obj: Feedback) -> str:
        return object_link(obj.message or obj.tool_call or obj.run)

    @admin.display(description="tags")
    def tag_list(self, obj: Feedback) -> str:
        return ", ".join(map(str, obj.tags))


@admin.register(Score)
class ScoreAdmin(ReadOnlyAdmin):
    """Scores of runs and messages, by users, evaluators and admins."""

    list_display = ("name", "shown_value", "source", "target", "evaluation", "created_at")
    list_filter = ("source", "name")
    list_select_related = ("message", "run", "evaluation")
    readonly_fields = ("name", "shown_value", "source", "target", "evaluation", "comment")
    fields = readonly_fields

    @admin.display(description="value")
    def shown_value(self, obj: Score) -> str:
        return str(obj.value)

    @admin.display(description="target")
    def target(self, obj: Score) -> str:
        return object_link(obj.message or obj.run)


@admin.register(Evaluation)
class EvaluationAdmin(ReadOnlyAdmin):
    """Evaluations: which profiles were compared on which dataset, and the totals."""

    list_display = ("pk", "dataset", "profile_list", "examples", "started_at", "finished_at")
    readonly_fields = (
        "dataset",
        "dataset_sha256",
        "profile_list",
        "scorers",
        "examples",
        "started_at",
        "finished_at",
        "totals_json",
    )
    fields = readonly_fields

    @admin.display(description="profiles")
    def profile_list(self, obj: Evaluation) -> str:
        return ", ".join(map(str, obj.profiles))

    @admin.display(description="totals")
    def totals_json(self, obj: Evaluation) -> str:
        return pretty_json(obj.totals)
