"""Shared pieces of the admin: the read-only base, links, JSON and the transcript view."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib import admin
from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from conversations.domain.storable import dumps_compact, json_depth
from conversations.domain.timing import duration_ms
from conversations.models import Citation, Message, ProviderToolCall, Run, ToolCall
from conversations.selectors import count_of, last_run_status

from .files import FileView, file_views

__all__ = [
    "ReadOnlyAdmin",
    "TranscriptEntry",
    "build_transcript",
    "count_of",
    "format_duration",
    "last_run_status",
    "object_link",
    "pretty_json",
    "pretty_result",
    "render_runs",
    "render_transcript",
]

TRANSCRIPT_TEMPLATE = "conversations/admin/transcript.html"
RUNS_TEMPLATE = "conversations/admin/runs.html"


class ReadOnlyAdmin(admin.ModelAdmin):
    """View-only: no add, change or delete, whatever the user's permissions.

    Django then renders change pages without a save button and answers a POST
    to them with 403.
    """

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """May run the actions that change state through services (recover, answer).

        The model's real ``change`` permission, which the read-only page itself ignores.
        """
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")


PRETTY_JSON_DEPTH = 64
"""Deeper values are shown compact: indenting them would recurse past Python's limit."""


def pretty_json(value: Any) -> str:
    """Indented JSON for display (plain text: the template escapes it); compact when deep."""
    if json_depth(value) > PRETTY_JSON_DEPTH:
        try:
            return dumps_compact(value)
        except (TypeError, ValueError):
            return repr(value)
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def pretty_result(content: str) -> str:
    """A tool result as :func:`pretty_json` shows arguments when it is a JSON object or array;
    any other text as it is."""
    text = content.strip()
    if not text.startswith(("{", "[")):
        return content
    try:
        value = json.loads(text)
    except ValueError:
        return content  # cut at the size limit, or not JSON after all
    return pretty_json(value) if isinstance(value, dict | list) else content


def format_duration(milliseconds: int | None) -> str:
    """``"850 ms"``, ``"12.3 s"``, ``"4 min 05 s"``; ``""`` when unknown."""
    if milliseconds is None:
        return ""
    if milliseconds < 1000:
        return f"{milliseconds} ms"
    seconds = milliseconds / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def admin_url(obj: Any, *, site: str = "admin", action: str = "change") -> str:
    """The admin URL of ``obj`` (change page by default)."""
    opts = obj._meta
    return reverse(f"{site}:{opts.app_label}_{opts.model_name}_{action}", args=[obj.pk])


def object_link(obj: Any, text: str | None = None, *, site: str = "admin", anchor: str = "") -> str:
    """An escaped ``<a>`` to the admin page of ``obj``; ``"-"`` for ``None``."""
    if obj is None:
        return "-"
    url = admin_url(obj, site=site)
    return format_html('<a href="{}{}">{}</a>', url, anchor, str(obj) if text is None else text)


# The transcript -----------------------------------------------------------------


@dataclass(slots=True)
class CallView:
    """One tool call shown beside its result."""

    call: ToolCall
    arguments: str
    duration: str
    result: Message | None
    result_text: str = ""
    """The result's content, indented like the arguments when it is JSON."""
    files: list[FileView] = field(default_factory=list)
    """The files the result carries."""


@dataclass(slots=True)
class TranscriptEntry:
    """One message of the transcript; an assistant turn carries its calls."""

    message: Message
    calls: list[CallView] = field(default_factory=list)
    answers: ToolCall | None = None
    """For a tool message shown on its own: the call it answers (outside this view)."""
    run_url: str = ""
    usage: str = ""
    content: str = ""
    """The message's content; a tool result's indented like arguments when it is JSON."""
    provider_calls: list[ProviderToolCall] = field(default_factory=list)
    """The tools the provider ran itself for this turn."""
    sources: list[tuple[Citation, str]] = field(default_factory=list)
    """Its citations, each with its link (``""`` when the URL is not http(s), shown as text)."""
    view: str = ""
    """Where the view of the history the model answered from began, when it left any out."""
    files: list[FileView] = field(default_factory=list)
    """The message's files (a user's upload, a tool's images)."""


def _link(url: str) -> str:
    # A provider's URL becomes a link only when it is http(s): never javascript: or data:.
    return url if url.lower().startswith(("https://", "http://")) else ""


def _usage_text(message: Message) -> str:
    parts = []
    if message.total_tokens is not None:
        parts.append(
            f"tokens {message.prompt_tokens or 0} in / {message.completion_tokens or 0} out"
            f" / {message.total_tokens} total"
        )
    if message.cached_prompt_tokens:
        parts.append(f"{message.cached_prompt_tokens} cached")
    if message.reasoning_tokens:
        parts.append(f"{message.reasoning_tokens} reasoning")
    if message.latency_ms is not None:
        parts.append(f"latency {format_duration(message.latency_ms)}")
    return " · ".join(parts)


def view_marker(message: Message) -> str:
    """What the call that wrote ``message`` was sent of the history, when not all of it.

    Reads ``message.model_call`` (and its summary): select them with the messages.
    """
    try:
        call = message.model_call
    except ObjectDoesNotExist:
        return ""
    if not call.first_position:
        return ""
    summary = call.context_summary
    if summary is not None:
        return (
            f"the model saw a summary of #{summary.first_position} to #{summary.last_position}, "
            f"then #{call.first_position} on"
        )
    return f"the model saw #{call.first_position} on: earlier messages were not sent"


def build_transcript(
    messages: Sequence[Message],
    calls: Iterable[ToolCall],
    results: Mapping[int, Message],
    *,
    site: str = "admin",
    link_runs: bool = True,
) -> list[TranscriptEntry]:
    """Messages in position order, each call paired with the message answering it.

    ``results`` maps a call's primary key to its answer. A tool message whose
    call is in ``calls`` is shown beside that call rather than on its own line.
    No queries: everything is handed in (messages need ``tool_call`` selected
    for tool messages whose call lies outside ``calls``, and their
    ``provider_tool_calls`` and ``citations`` prefetched, and their
    ``attachment_links`` with the attachments).
    """
    by_message: dict[int, list[ToolCall]] = defaultdict(list)
    for call in calls:
        by_message[call.message_id].append(call)
    shown_beside = {call.pk for group in by_message.values() for call in group}
    entries = []
    for message in sorted(messages, key=lambda m: m.position):
        if message.tool_call_id is not None and message.tool_call_id in shown_beside:
            continue
        content = message.content
        if message.role == Message.Role.TOOL:
            content = pretty_result(content)
        entry = TranscriptEntry(
            message=message,
            usage=_usage_text(message),
            content=content,
            view=view_marker(message),
            files=file_views(message, site=site),
        )
        if link_runs and message.run_id is not None:
            entry.run_url = reverse(f"{site}:conversations_run_change", args=[message.run_id])
        if message.tool_call_id is not None:
            entry.answers = message.tool_call
        if message.role == Message.Role.ASSISTANT:
            entry.provider_calls = list(message.provider_tool_calls.all())
            entry.sources = [(c, _link(c.url)) for c in message.citations.all()]
        for call in sorted(by_message.get(message.pk, ()), key=lambda c: c.index):
            result = results.get(call.pk)
            entry.calls.append(
                CallView(
                    call=call,
                    arguments=pretty_json(call.arguments),
                    duration=format_duration(duration_ms(call.started_at, call.finished_at)),
                    result=result,
                    result_text=pretty_result(result.content) if result is not None else "",
                    files=file_views(result, site=site),
                )
            )
        entries.append(entry)
    return entries


def render_transcript(entries: Sequence[TranscriptEntry], *, empty: str) -> SafeString:
    """The transcript as HTML; every value is escaped by the template."""
    return render_to_string(TRANSCRIPT_TEMPLATE, {"entries": entries, "empty": empty})


def render_runs(runs: Sequence[Run], *, site: str = "admin") -> SafeString:
    """A table of runs (newest first) linking to their trace."""
    rows = [
        {
            "run": run,
            "url": reverse(f"{site}:conversations_run_change", args=[run.pk]),
            "duration": format_duration(duration_ms(run.started_at, run.finished_at)),
        }
        for run in runs
    ]
    return render_to_string(RUNS_TEMPLATE, {"rows": rows})
