"""Feedback, scores and evaluations in the admin: lists, the feedback-rate page, side by side.

The rate page draws ups, downs and the share of ups per day as the usage
page does (server-side SVG with a value axis, :mod:`.charts`), with tables
per profile, model and tool that link to the conversations and calls
judged. The conversation and run lists filter on feedback value and tag
(``FeedbackValueFilter``, ``FeedbackTagFilter``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import connections
from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from conversations import selectors
from conversations.models import Conversation, Evaluation, Feedback, Run, Score

from .charts import daily_chart
from .display import ReadOnlyAdmin, object_link

__all__ = [
    "EvaluationAdmin",
    "FeedbackAdmin",
    "FeedbackTagFilter",
    "FeedbackValueFilter",
    "ScoreAdmin",
    "TagFilter",
]

RATE_DAYS = 30
TOP = 10


def _common_tags(limit: int = 50) -> list[tuple[str, str]]:
    counts: dict[str, int] = {}
    for tags in Feedback.objects.exclude(tags=[]).values_list("tags", flat=True)[:5000]:
        for tag in tags if isinstance(tags, list) else ():
            counts[str(tag)] = counts.get(str(tag), 0) + 1
    common = sorted(counts, key=lambda tag: (-counts[tag], tag))[:limit]
    return [(tag, tag) for tag in common]


def _tagged(rows: QuerySet[Feedback], tag: str) -> QuerySet[Feedback]:
    if connections[rows.db].vendor == "postgresql":
        return rows.filter(tags__contains=[tag])  # jsonb containment
    # SQLite has no JSON containment: its JSON text holds the tag as json.dumps
    # writes it (quoted, non-ASCII as \\u escapes, as SQLite stores it).
    return rows.annotate(tags_text=Cast("tags", TextField())).filter(
        tags_text__contains=json.dumps(tag)
    )


def _about(model: type[Conversation] | type[Run]) -> Q:
    """Feedback on the conversation or run of the outer row, or on what is in it."""
    if model is Conversation:
        return (
            Q(message__conversation=OuterRef("pk"))
            | Q(tool_call__conversation=OuterRef("pk"))
            | Q(run__conversation=OuterRef("pk"))
        )
    return (
        Q(run=OuterRef("pk"))
        | Q(message__run=OuterRef("pk"))
        | Q(tool_call__message__run=OuterRef("pk"))
    )


class FeedbackValueFilter(admin.SimpleListFilter):
    """Conversations or runs with feedback up, down, any, or none."""

    title = "feedback"
    parameter_name = "feedback"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("up", "Rated up"), ("down", "Rated down"), ("any", "Rated"), ("none", "Not rated")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        rows = Feedback.objects.filter(_about(queryset.model))
        if value == "up":
            return queryset.filter(Exists(rows.filter(value=1)))
        if value == "down":
            return queryset.filter(Exists(rows.filter(value=-1)))
        if value == "any":
            return queryset.filter(Exists(rows))
        return queryset.exclude(Exists(rows))


class FeedbackTagFilter(admin.SimpleListFilter):
    """Conversations or runs with feedback carrying a tag."""

    title = "feedback tag"
    parameter_name = "feedback_tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return _common_tags()

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        tag = self.value()
        if not tag:
            return queryset
        rows = _tagged(Feedback.objects.filter(_about(queryset.model)), tag)
        return queryset.filter(Exists(rows))


class TagFilter(admin.SimpleListFilter):
    """Feedback carrying one tag (the most used fifty are offered)."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return _common_tags()

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        tag = self.value()
        return _tagged(queryset, tag) if tag else queryset


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyAdmin):
    """Users' thumbs on answers, tool calls and runs, and the feedback-rate page."""

    change_list_template = "conversations/admin/feedback_change_list.html"
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

    def get_urls(self) -> list[URLPattern]:
        rates = path(
            "rates/",
            self.admin_site.admin_view(self.rates_view),
            name="conversations_feedback_rates",
        )
        return [rates, *super().get_urls()]

    def rates_view(self, request: HttpRequest) -> HttpResponse:
        """Ups, downs and their share per day for 30 days; per profile, model and tool."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        now = datetime.now(UTC)
        first = now.date() - timedelta(days=RATE_DAYS - 1)
        since = datetime.combine(first, datetime.min.time(), tzinfo=UTC)
        per_day = {
            rate.key: rate
            for rate in selectors.feedback_rates(since=since, until=now, group_by="day")
        }
        days = [first + timedelta(days=n) for n in range(RATE_DAYS)]
        rows = [(day, per_day.get(day.isoformat())) for day in days]
        up = sum(rate.up for rate in per_day.values())
        down = sum(rate.down for rate in per_day.values())
        context = {
            **self.admin_site.each_context(request),
            "title": "Feedback rates",
            "opts": self.model._meta,
            "first": first,
            "last": now.date(),
            "up": up,
            "down": down,
            "share": round(100 * up / (up + down)) if up + down else None,
            "up_chart": daily_chart([(day, rate.up if rate else 0) for day, rate in rows]),
            "down_chart": daily_chart([(day, rate.down if rate else 0) for day, rate in rows]),
            "share_chart": daily_chart(
                [
                    (day, round(100 * rate.up / rate.total) if rate and rate.total else 0)
                    for day, rate in rows
                ],
                unit=" %",
            ),
            "groups": [
                (heading, self._linked(since, now, group_by))
                for heading, group_by in (
                    ("Profiles", "profile"),
                    ("Models", "model"),
                    ("Tools", "tool"),
                )
            ],
        }
        return TemplateResponse(request, "conversations/admin/feedback_rates.html", context)

    def _linked(self, since: datetime, until: datetime, group_by: str) -> list[tuple[Any, str]]:
        conversations = reverse(f"{self.admin_site.name}:conversations_conversation_changelist")
        calls = reverse(f"{self.admin_site.name}:conversations_toolcall_changelist")
        runs = reverse(f"{self.admin_site.name}:conversations_run_changelist")
        linked = []
        for rate in selectors.feedback_rates(since=since, until=until, group_by=group_by)[:TOP]:
            if group_by == "profile" and rate.ref is not None:
                query = {"profile__id__exact": rate.ref, "feedback": "any"}
                url = f"{conversations}?{urlencode(query)}"
            elif group_by == "model" and rate.key:
                url = f"{runs}?{urlencode({'q': rate.key, 'feedback': 'any'})}"
            elif group_by == "tool" and rate.key:
                url = f"{calls}?{urlencode({'q': rate.key})}"
            else:
                url = ""
            linked.append((rate, url))
        return linked


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
        "totals_table",
        "side_by_side",
    )
    fields = readonly_fields

    @admin.display(description="profiles")
    def profile_list(self, obj: Evaluation) -> str:
        return ", ".join(map(str, obj.profiles))

    @admin.display(description="totals")
    def totals_table(self, obj: Evaluation) -> SafeString:
        profiles = (obj.totals or {}).get("profiles") or {}
        if not profiles:
            return format_html("{}", "Not finished.")
        names = list(obj.scorers)
        head = format_html_join(
            "",
            "<th>{}</th>",
            (
                (name,)
                for name in [
                    "profile",
                    "runs",
                    "failures",
                    *names,
                    "cost",
                    "p50 ms",
                    "p95 ms",
                    "wins",
                ]
            ),
        )
        body = format_html_join(
            "",
            "<tr>{}</tr>",
            (
                (
                    format_html_join(
                        "",
                        "<td>{}</td>",
                        (
                            (cell if cell is not None else "-",)
                            for cell in [
                                slug,
                                row.get("runs"),
                                row.get("failures"),
                                *(row.get("scores", {}).get(name) for name in names),
                                row.get("cost"),
                                row.get("latency_p50_ms"),
                                row.get("latency_p95_ms"),
                                row.get("wins"),
                            ]
                        ),
                    ),
                )
                for slug, row in profiles.items()
            ),
        )
        return format_html(
            '<table class="evaluation-totals"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
            head,
            body,
        )

    @admin.display(description="examples, side by side")
    def side_by_side(self, obj: Evaluation) -> SafeString:
        examples = (obj.totals or {}).get("examples") or []
        if not examples:
            return format_html("{}", "-")
        slugs = list(obj.profiles)
        runs = {
            str(run.pk): run
            for run in Run.objects.filter(conversation__evaluation=obj).only("pk", "status")
        }
        head = format_html_join(
            "", "<th>{}</th>", ((name,) for name in ["#", "input", *slugs, "winner"])
        )

        def answer(row: dict[str, Any], slug: str) -> SafeString:
            given = row.get("answers", {}).get(slug) or {}
            scores = ", ".join(f"{name}={value}" for name, value in given.get("scores", {}).items())
            run = runs.get(given.get("run") or "")
            return format_html(
                "<div>{}</div><div><small>{}</small></div><div><small>{}{}</small></div>",
                (given.get("answer") or "")[:300],
                scores or "-",
                "FAILED " + given.get("error", "") if given.get("failed") else "",
                object_link(run, "run") if run is not None else "",
            )

        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td>{}<td>{}</td></tr>",
            (
                (
                    row.get("index"),
                    str(row.get("input", ""))[:200],
                    format_html_join("", "<td>{}</td>", ((answer(row, slug),) for slug in slugs)),
                    row.get("winner") or "-",
                )
                for row in examples
            ),
        )
        return format_html(
            '<table class="evaluation-side-by-side"><thead><tr>{}</tr></thead>'
            "<tbody>{}</tbody></table>",
            head,
            body,
        )
