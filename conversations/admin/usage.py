"""Usage in the admin: the model-call ledger, the budgets, and a usage page with charts.

The charts are SVG rendered on the server (no script, no CDN; see
:mod:`.charts`), so the page works offline and in every browser the admin
supports.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from conversations.conf import app_settings
from conversations.models import Budget, ContextSummary, ModelCall
from conversations.selectors.usage import UsageRow, usage_calls, usage_totals
from conversations.services.usage import budget_statuses

from .charts import daily_chart
from .display import ReadOnlyAdmin, object_link

__all__ = ["BudgetAdmin", "ModelCallAdmin"]

CHART_DAYS = 30
TOP = 10


def _days(rows: list[UsageRow], first: date) -> list[tuple[date, UsageRow | None]]:
    by_day = {row.key: row for row in rows}
    days = [first + timedelta(days=n) for n in range(CHART_DAYS)]
    return [(day, by_day.get(day.isoformat())) for day in days]


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    """Every request sent to a provider: tokens, latency, the prices it was charged at, cost."""

    change_list_template = "conversations/admin/modelcall_change_list.html"
    list_display = (
        "started_at",
        "status",
        "error_code",
        "model",
        "profile",
        "user",
        "prompt_tokens",
        "completion_tokens",
        "estimated",
        "cost",
        "latency_ms",
        "run_link",
    )
    list_select_related = ("profile", "user", "run")
    list_filter = ("status", "estimated", "model", "profile", "user", "started_at")
    date_hierarchy = "started_at"

    @admin.display(description="Run")
    def run_link(self, obj: ModelCall) -> str:
        return object_link(obj.run, text="run")

    def get_urls(self) -> list[URLPattern]:
        usage = path(
            "usage/",
            self.admin_site.admin_view(self.usage_view),
            name="conversations_modelcall_usage",
        )
        return [usage, *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        """Cost and tokens per day for the last 30 days, top models/profiles/users, budgets."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        now = datetime.now(UTC)
        first = now.date() - timedelta(days=CHART_DAYS - 1)
        calls = usage_calls(user=None, since=first, until=now.date())
        total, per_day = usage_totals(calls=calls, group_by="day")
        days = _days(per_day, first)
        context = {
            **self.admin_site.each_context(request),
            "title": "Model usage",
            "opts": self.model._meta,
            "currency": app_settings().CURRENCY,
            "first": first,
            "last": now.date(),
            "total": total,
            "cost_chart": daily_chart(
                [(day, (row.cost or Decimal(0)) if row else Decimal(0)) for day, row in days],
                unit=f" {app_settings().CURRENCY}",
            ),
            "token_chart": daily_chart(
                [(day, row.total_tokens if row else 0) for day, row in days], unit=" tokens"
            ),
            "tops": [
                ("Models", self._top(calls, "model")),
                ("Profiles", self._top(calls, "profile")),
                ("Users", self._top(calls, "user")),
            ],
            "budgets": budget_statuses(now=now),
        }
        return TemplateResponse(request, "conversations/admin/usage.html", context)

    @staticmethod
    def _top(calls: Any, group_by: str) -> list[tuple[UsageRow, str]]:
        _total, rows = usage_totals(calls=calls, group_by=group_by, order_by_cost=True)
        runs = reverse("admin:conversations_run_changelist")
        model_calls = reverse("admin:conversations_modelcall_changelist")
        linked = []
        for row in rows[:TOP]:
            if group_by == "model":
                url = f"{runs}?{urlencode({'q': row.key or ''})}"
            elif group_by == "profile" and row.ref is not None:
                url = f"{runs}?{urlencode({'profile__id__exact': row.ref})}"
            elif group_by == "user" and row.ref is not None:
                url = f"{model_calls}?{urlencode({'user__id__exact': row.ref})}"
            else:
                url = ""
            linked.append((row, url))
        return linked


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    """Limits on tokens and cost per period; ``block`` stops further calls, ``warn`` signals."""

    list_display = (
        "name",
        "scope",
        "user",
        "profile",
        "period",
        "token_limit",
        "cost_limit",
        "action",
        "is_active",
    )
    list_filter = ("scope", "period", "action", "is_active")
    search_fields = ("name",)
    autocomplete_fields = ("profile",)
    raw_id_fields = ("user",)


@admin.register(ContextSummary)
class ContextSummaryAdmin(ReadOnlyAdmin):
    """What the summarize strategy sent in place of older turns, with its call in the ledger."""

    list_display = ("conversation", "first_position", "last_position", "model", "created_at")
    list_select_related = ("conversation",)
    list_filter = ("model",)
    raw_id_fields = ("conversation", "model_call")
