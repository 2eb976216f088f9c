"""Narrow list columns: short texts whose whole value is one hover away.

The busiest changelists (runs, tool settings) are drawn with a fixed table
layout (``conversations/admin/fitted_change_list.html``) so that they fit a
1280 px window beside the admin's navigation and filters: a cell shows what
fits, ends with an ellipsis, and its ``title`` carries the whole value.
"""

from __future__ import annotations

from django.utils.html import format_html
from django.utils.safestring import SafeString

__all__ = ["compact_count", "titled"]


def titled(text: object, title: object = None) -> SafeString:
    """``text`` in a span whose tooltip is ``title`` (default: ``text`` itself)."""
    return format_html('<span title="{}">{}</span>', text if title is None else title, text)


def compact_count(count: int) -> str:
    """``"9999"``, ``"364k"``, ``"1.2M"``: at most five characters for any count below a billion."""
    if count < 10_000:
        return str(count)
    if count < 999_500:
        return f"{count / 1000:.0f}k"
    return f"{count / 1_000_000:.1f}M" if count < 99_950_000 else f"{count / 1_000_000:.0f}M"
