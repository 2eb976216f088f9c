"""A conversation's family in the admin: the root and every branch, each a link."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from conversations.models import Conversation

from .display import object_link

__all__ = ["render_family"]


def render_family(
    members: Sequence[Conversation], *, current: Conversation, site: str
) -> SafeString:
    """A list of the family, root first; each entry says where it forked; the current one bold."""
    if len(members) <= 1:
        return format_html("{}", "No branches.")
    rows = []
    for member in members:
        link = object_link(member, f"{member.title or 'Untitled'} ({member.pk})", site=site)
        if member.pk == current.pk:
            link = format_html("<strong>{}</strong>", link)
        if member.forked_from_id is None:
            where = format_html("{}", "root")
        elif member.forked_at_position is None:
            where = format_html("{}", "branch, nothing copied")
        else:
            where = format_html("branch at position {}", member.forked_at_position)
        rows.append((link, where))
    items = format_html_join("", "<li>{} &mdash; {}</li>", rows)
    return format_html('<ul class="conversation-family">{}</ul>', items)
