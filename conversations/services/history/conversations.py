"""Conversation-level use cases: import, update, delete and the dry-run export."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from django.db import transaction
from django.utils import timezone

from conversations.domain import normalise_messages
from conversations.exceptions import ConversationBusy, InvalidArgumentError
from conversations.models import Conversation, Profile, Run, ToolCall
from conversations.providers.base import HTTPProvider
from conversations.selectors import get_default_profile, history_for_provider, open_tool_calls

from ..configuration.providers import HTTP_ADAPTERS
from ..loop.recovery import recover_runs
from ..loop.tool_loop import request_setup
from ..transcript.messages import append_messages, check_title, create_conversation

__all__ = [
    "EXPORT_FORMATS",
    "delete_conversation",
    "export_payload",
    "import_conversation",
    "update_conversation",
]

_DRY_RUN_KEY: Final = "dry-run-placeholder-never-sent"  # a placeholder, never sent

EXPORT_FORMATS: Final[Mapping[str, type[HTTPProvider]]] = {
    name: HTTP_ADAPTERS[name] for name in ("openai", "anthropic", "gemini", "ollama")
}
"""Export format (one per wire family) -> the adapter whose pure ``build_payload`` makes the body.

Looked up in the one adapter table, so a format cannot drift from what the loop sends."""


def export_payload(*, conversation: Conversation, format: str) -> dict[str, Any]:
    """The request body ``format``'s adapter would send for the next turn; nothing is sent.

    Same inputs as the tool loop: the conversation's profile (else the
    default one), its system prompt before the stored history, the tools it
    may offer and its completion options. Raises ``KeyError`` for an unknown
    format (the caller validates it against :data:`EXPORT_FORMATS`).
    """
    adapter = EXPORT_FORMATS[format](api_key=_DRY_RUN_KEY)
    profile = conversation.profile or get_default_profile()
    history = history_for_provider(conversation=conversation, profile=profile)
    request = request_setup(profile=profile)
    return adapter.build_payload(history, request.specs, request.options)


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
    when its result is flagged ``is_error``.
    """
    try:
        items = normalise_messages(messages)
    except InvalidArgumentError as exc:
        raise exc.at("messages") from None
    with transaction.atomic():
        conversation = create_conversation(
            owner=owner, title=title, profile=profile, metadata=metadata
        )
        try:
            append_messages(conversation=conversation, messages=items)
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
    through here. Raises :class:`ConversationBusy` while a live run holds it.
    """
    recover_runs(conversation=conversation)
    with transaction.atomic():
        # Locked first: a run being started meanwhile either committed before
        # (then it is seen below) or waits for this delete and fails (busy).
        list(Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk"))
        if Run.objects.filter(conversation=conversation, status=Run.Status.RUNNING).exists():
            raise ConversationBusy("a run is running on this conversation; try again later")
        conversation.delete()
