"""Conversation-level use cases: import, update, delete and the dry-run export."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from django.db import transaction
from django.utils import timezone

from conversations.domain import normalise_messages
from conversations.exceptions import ConversationBusy, InvalidArgumentError
from conversations.models import ContextSummary, Conversation, Profile, Run, ToolCall
from conversations.providers.base import HTTPProvider
from conversations.selectors import (
    get_default_profile,
    history_and_tail,
    open_tool_calls,
    referenced_attachments,
    unreferenced_attachments,
)

from ..attachments import prepare_for_model
from ..configuration.providers import HTTP_ADAPTERS
from ..loop.context import context_window_for, read_bound, view_for
from ..loop.recovery import recover_runs
from ..loop.summaries import latest_summary
from ..loop.tool_loop import request_setup
from ..transcript.messages import append_messages, check_title, create_conversation
from .imported_activity import imported_activity, store_imported_activity
from .imported_files import with_imported_files

__all__ = [
    "EXPORT_FORMATS",
    "ExportedView",
    "delete_conversation",
    "export_payload",
    "export_view",
    "import_conversation",
    "update_conversation",
]

_DRY_RUN_KEY: Final = "dry-run-placeholder-never-sent"  # a placeholder, never sent

EXPORT_FORMATS: Final[Mapping[str, type[HTTPProvider]]] = {
    name: HTTP_ADAPTERS[name] for name in ("openai", "anthropic", "gemini", "ollama")
}
"""Export format (one per wire family) -> the adapter whose pure ``build_payload`` makes the body.

Looked up in the one adapter table, so a format cannot drift from what the loop sends."""


@dataclass(frozen=True, slots=True)
class ExportedView:
    """The dry-run export: a request body and where its view of the history begins."""

    payload: dict[str, Any]
    """The body the adapter would send."""
    first_position: int | None
    """The first stored position it sends (0: the whole history; ``None``: none stored)."""
    summary: ContextSummary | None = None
    """The stored summary it sends in place of the messages before ``first_position``."""
    summarize_through: int | None = None
    """With the ``summarize`` strategy and no reusable summary: the next call would first
    summarise the stored messages up to here (the export writes none and sends none)."""


def export_view(*, conversation: Conversation, format: str) -> ExportedView:
    """The request body ``format``'s adapter would send for the next turn, and its view.

    Same inputs as the tool loop: the conversation's profile (else the
    default one), its system prompt, the view of the stored history the next
    call would send (see docs/context.md; nothing is sent, no summary is
    written), the tools it may offer and its completion options. Raises
    ``KeyError`` for an unknown format (the caller validates it against
    :data:`EXPORT_FORMATS`) and :class:`ContextTooLarge` when no view fits.
    """
    adapter = EXPORT_FORMATS[format](api_key=_DRY_RUN_KEY)
    profile = conversation.profile or get_default_profile()
    history, tail = history_and_tail(
        conversation=conversation, profile=profile, within=read_bound(profile)
    )
    request = request_setup(profile=profile)
    context = context_window_for(profile)
    if context is not None and context.summarize:
        context.summary, context.summary_read = (
            latest_summary(conversation_id=conversation.pk),
            True,
        )
    sent = view_for(
        history=history, tail=tail, profile=profile, specs=request.specs, context=context
    )
    # Files as the loop would send them: native parts (base64) or their fallback text.
    messages = prepare_for_model(
        sent.messages, modalities=request.input_modalities, provider_name=adapter.provider_name
    )
    payload = adapter.build_payload(messages, request.specs, request.options)
    return ExportedView(payload, sent.first_position, sent.summary, sent.summarize_through)


def export_payload(*, conversation: Conversation, format: str) -> dict[str, Any]:
    """:func:`export_view`'s body alone."""
    return export_view(conversation=conversation, format=format).payload


def import_conversation(
    *,
    owner: Any,
    messages: Sequence[Any],
    title: str = "",
    profile: Profile | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Conversation:
    """Create a conversation holding ``messages`` (OpenAI wire shape), all or nothing.

    Every message goes through ``ChatMessage.from_dict`` and the batch through
    ``append_messages``' pairing rules (a tool message may carry
    ``is_error``); an imported history must also answer every call it makes (``unanswered_tool_calls`` otherwise). Errors are
    :class:`InvalidArgumentError` whose ``field`` starts with ``messages/``.
    Each imported call is recorded as answered: ``succeeded``, or ``failed``
    when its result is flagged ``is_error``. A user or tool message may list
    ``attachments`` (``{id, sha256}`` references, as the export writes them)
    to attachments ``owner`` owns; bytes inline are refused (``unstored_part``).
    An assistant message may list ``provider_tool_calls`` and ``citations``
    in the shape the export writes them (:mod:`.imported_activity`).
    """
    try:
        items = normalise_messages(messages)
        # Files: references to the owner's own attachments (never bytes), checked here.
        items = with_imported_files(owner=owner, raw=messages, items=items)
        # What the provider did for an assistant turn: its own tool calls and the citations.
        activity = imported_activity(raw=messages, items=items)
    except InvalidArgumentError as exc:
        raise exc.at("messages") from None
    with transaction.atomic():
        conversation = create_conversation(
            owner=owner, title=title, profile=profile, metadata=metadata
        )
        try:
            rows = append_messages(conversation=conversation, messages=items)
            store_imported_activity(rows=rows, activity=activity)
            still_open = open_tool_calls(conversation=conversation)
            # An imported call has its result: it is answered, not pending.
            answered = ToolCall.objects.filter(conversation=conversation)
            answered.filter(results__is_error=False).update(status=ToolCall.Status.SUCCEEDED)
            answered.filter(results__is_error=True).update(status=ToolCall.Status.FAILED)
            if still_open:
                call = still_open[0]
                names = ", ".join(c.call_id for c in still_open)
                raise InvalidArgumentError(
                    f"every tool call must be answered; unanswered: {names}",
                    code="unanswered_tool_calls",
                    field=f"{call.message.position}/tool_calls/{call.index}",
                )
        except InvalidArgumentError as exc:
            raise exc.at("messages") from None
    return conversation


def update_conversation(*, conversation: Conversation, **changes: Any) -> Conversation:
    """Set ``title``, ``profile`` and/or ``metadata``; other keys are refused."""
    allowed = {"title", "profile", "metadata"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidArgumentError(
            f"cannot change {', '.join(sorted(unknown))}", code="invalid_field"
        )
    if not changes:
        return conversation
    if "title" in changes:
        check_title(changes["title"])
    for name, value in changes.items():
        setattr(conversation, name, value)
    conversation.updated_at = timezone.now()
    conversation.save(update_fields=[*changes, "updated_at"])
    return conversation


def delete_conversation(*, conversation: Conversation) -> None:
    """Delete a conversation and its history; refused while a run is running on it.

    Runs whose process died are recovered first, so a conversation left
    ``running`` by a crash can be deleted. The API and the admin both delete
    through here. The attachments its messages referenced and no other
    message does are deleted with it (their stored objects once committed).
    Raises :class:`ConversationBusy` while a live run holds it.
    """
    recover_runs(conversation=conversation)
    with transaction.atomic():
        # Locked first: a run being started meanwhile either committed before
        # (then it is seen below) or waits for this delete and fails (busy).
        list(Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk"))
        if Run.objects.filter(conversation=conversation, status=Run.Status.RUNNING).exists():
            raise ConversationBusy("a run is running on this conversation; try again later")
        files = referenced_attachments(conversation=conversation)
        conversation.delete()
        # Its files go too, unless another message (of another conversation) references them.
        unreferenced_attachments(ids=files).delete()
