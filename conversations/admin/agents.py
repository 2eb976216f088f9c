"""A run's place among the runs of its agents, on its admin page: costs and the run tree."""

from __future__ import annotations

from decimal import Decimal

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from conversations import selectors
from conversations.models import Run

from .display import object_link

__all__ = ["cost_with_agents", "run_tree"]


def cost_with_agents(run: Run) -> str:
    """``own · with its agents' runs`` (``-`` where nothing had a price)."""
    below = [r.cost for r in selectors.descendant_runs(run=run).only("cost") if r.cost is not None]
    total = None if run.cost is None and not below else (run.cost or Decimal(0)) + sum(below)
    return f"{_money(run.cost)} own · {_money(total)} with its agents"


def run_tree(run: Run, *, site: str) -> SafeString:
    """The runs of the chain ``run`` belongs to, from its first, nested by agent call."""
    root_id = run.root_run_id or run.pk
    root = Run.objects.select_related("profile").get(pk=root_id)
    below = list(
        selectors.descendant_runs(run=root).select_related("profile").order_by("started_at", "pk")
    )
    if not below:
        return mark_safe("-")
    children: dict[object, list[Run]] = {}
    for each in below:
        children.setdefault(each.parent_run_id, []).append(each)
    return _branch([root], children, current=run.pk, site=site)


def _branch(
    runs: list[Run], children: dict[object, list[Run]], *, current: object, site: str
) -> SafeString:
    items = format_html_join(
        "",
        "<li>{}{}</li>",
        (
            (
                _label(each, current=current, site=site),
                _branch(children[each.pk], children, current=current, site=site)
                if each.pk in children
                else "",
            )
            for each in runs
        ),
    )
    return format_html('<ul class="conversations-run-tree">{}</ul>', items)


def _label(run: Run, *, current: object, site: str) -> SafeString:
    profile = run.profile.slug if run.profile else "-"
    text = f"{profile}: {run.get_status_display()} · {_money(run.cost)}"
    link = object_link(run, text=text, site=site)
    return (
        format_html("<strong>{}</strong>", link) if run.pk == current else format_html("{}", link)
    )


def _money(value: Decimal | None) -> str:
    return "-" if value is None else f"{value.normalize():f}"
