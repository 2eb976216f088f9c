"""Data protection: purge conversations past their retention, erase a user, redact a history.

Two modes. ``delete`` removes whole conversations (always allowed: a
conversation goes with all its messages, calls and runs). ``redact`` keeps
the shape and the accounting: message contents, tool arguments and results
become ``CONVERSATIONS["REDACTION_MARKER"]``, titles, metadata, provider
metadata, tool errors, run texts, reviewers' reasons and feedback comments
and tags are emptied (and the conversation is marked ``redacted_at``), and
roles, positions, call ids, statuses, decisions, runs, usage and costs stay.
Only columns no rule reads are changed (a decided approval's reason may
become empty and nothing else), so every database rule still holds and the
history is still one every provider accepts.

Files go with what referenced them: deleting a conversation deletes the
attachments no other message references (and their stored objects);
redacting one removes its messages' references and, likewise, the
attachments left without any; erasing a user deletes every attachment of
theirs that no message references any more, uploads never sent included.
An attachment another message still references stays.

Erasing a user also reaches their calls over MCP (``MCPCall``, the audit of
``/mcp/``): deleted, or redacted like a conversation (arguments become the
marker, errors are emptied, and a tool name the app does not have, which the
caller typed, becomes the marker; status, duration and size stay).

A conversation with a running run (executing, or waiting for a worker) is
never touched: it is skipped and reported, and the next purge takes it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

from django.db import transaction
from django.db.models import DateTimeField, Max, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from conversations.conf import app_settings
from conversations.exceptions import ConversationBusy, InvalidArgumentError
from conversations.models import (
    Attachment,
    Citation,
    Conversation,
    Feedback,
    MCPCall,
    Message,
    MessageAttachment,
    Profile,
    ProviderToolCall,
    Run,
    ToolApproval,
    ToolCall,
)
from conversations.selectors import referenced_attachments, unreferenced_attachments
from conversations.tools import registry

from ..attachments import delete_unreferenced_attachments
from .conversations import delete_conversation

__all__ = [
    "MODES",
    "RetentionReport",
    "erase_user",
    "expired_conversations",
    "purge_conversations",
    "redact_conversation",
]

MODES: Final = ("delete", "redact")


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What a purge or an erasure did (or, in a dry run, would do)."""

    mode: str
    """``delete`` or ``redact``."""
    dry_run: bool
    """Nothing was changed."""
    done: tuple[uuid.UUID, ...]
    """The conversations deleted or redacted (or that would be)."""
    skipped: tuple[uuid.UUID, ...]
    """The conversations left alone because a run is running on them."""
    mcp_calls: int = 0
    """The user's calls over MCP deleted or redacted (or that would be); 0 for a purge."""
    attachments: int = 0
    """The user's attachments deleted by an erasure (or that would be); 0 for a purge."""


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise InvalidArgumentError(
            f"mode must be one of {', '.join(MODES)}, got {mode!r}",
            code="invalid_mode",
            field="mode",
        )


def expired_conversations(*, now: datetime | None = None) -> QuerySet[Conversation]:
    """Conversations whose last message (or creation, when empty) is older than their retention.

    Conversations whose profile has no ``retention_days`` (or that have no
    profile) are kept forever. One subquery per profile with a retention.
    """
    now = now or timezone.now()
    last_activity = Coalesce(
        Max("messages__created_at"), "created_at", output_field=DateTimeField()
    )
    condition = Q(pk__in=[])
    for profile in Profile.objects.filter(retention_days__isnull=False).only(
        "pk", "retention_days"
    ):
        assert profile.retention_days is not None
        cutoff = now - timedelta(days=profile.retention_days)
        expired = (
            Conversation.objects.filter(profile=profile)
            .annotate(last_activity=last_activity)
            .filter(last_activity__lt=cutoff)
            .values("pk")
        )
        condition |= Q(pk__in=expired)
    return Conversation.objects.filter(condition).order_by("created_at", "pk")


def purge_conversations(
    *, mode: str = "delete", dry_run: bool = False, now: datetime | None = None
) -> RetentionReport:
    """Delete or redact every conversation past its profile's retention."""
    _check_mode(mode)
    return _apply(expired_conversations(now=now), mode=mode, dry_run=dry_run)


def erase_user(*, user: Any, mode: str = "delete", dry_run: bool = False) -> RetentionReport:
    """Delete or redact everything ``user`` owns (their conversations and all in them)."""
    _check_mode(mode)
    owned = Conversation.objects.filter(owner=user).order_by("created_at", "pk")
    files = Attachment.objects.filter(owner=user)
    before = files.count()
    report = _apply(owned, mode=mode, dry_run=dry_run)
    calls = MCPCall.objects.filter(user=user)
    count = calls.count() if dry_run else _erase_mcp_calls(calls, mode=mode)
    # Files still referenced by a conversation skipped as busy stay until the next erasure.
    if dry_run:
        kept = files.filter(links__message__conversation__in=report.skipped).distinct().count()
    else:
        delete_unreferenced_attachments(owner=user)
        kept = files.count()
    return replace(report, mcp_calls=count, attachments=before - kept)


def _erase_mcp_calls(calls: QuerySet[MCPCall], *, mode: str) -> int:
    if mode == "delete":
        return calls.delete()[1].get(MCPCall._meta.label, 0)
    marker = app_settings().REDACTION_MARKER
    with transaction.atomic():
        count = calls.update(arguments={"redacted": marker}, error="")
        calls.exclude(tool__in=list(registry.names())).update(tool=marker[:200])
    return count


def _apply(conversations: QuerySet[Conversation], *, mode: str, dry_run: bool) -> RetentionReport:
    busy = set(
        Run.objects.filter(
            conversation__in=conversations.values("pk"), status=Run.Status.RUNNING
        ).values_list("conversation_id", flat=True)
    )
    done: list[uuid.UUID] = []
    skipped: list[uuid.UUID] = []
    for conversation in conversations.iterator(chunk_size=500):
        pk = conversation.pk  # a deleted instance forgets it
        if pk in busy:
            skipped.append(pk)
            continue
        if not dry_run:
            try:
                if mode == "delete":
                    _delete(conversation)
                else:
                    redact_conversation(conversation=conversation)
            except ConversationBusy:
                # A run started since the list was read.
                skipped.append(pk)
                continue
        done.append(pk)
    return RetentionReport(mode=mode, dry_run=dry_run, done=tuple(done), skipped=tuple(skipped))


def _delete(conversation: Conversation) -> None:
    # The branches of a deleted conversation stay; they only lose the link.
    delete_conversation(conversation=conversation)


def redact_conversation(*, conversation: Conversation) -> None:
    """Replace the contents of ``conversation`` with the marker, keeping its shape and usage.

    Raises :class:`ConversationBusy` while a run is running on it.
    """
    marker = app_settings().REDACTION_MARKER
    with transaction.atomic():
        # Taking the row lock first orders this against append_messages.
        Conversation.objects.select_for_update(no_key=True).filter(pk=conversation.pk).exists()
        if Run.objects.filter(conversation=conversation, status=Run.Status.RUNNING).exists():
            raise ConversationBusy("a run is running on this conversation; try again later")
        messages = Message.objects.filter(conversation=conversation)
        messages.exclude(content="").update(content=marker)
        messages.exclude(provider_metadata={}).update(provider_metadata={})
        # What the provider searched or ran, and the sources it cited, quote the conversation.
        ProviderToolCall.objects.filter(message__conversation=conversation).update(
            query="", code="", result_summary="", provider_metadata={}
        )
        Citation.objects.filter(message__conversation=conversation).delete()
        calls = ToolCall.objects.filter(conversation=conversation)
        calls.exclude(arguments={}).update(arguments={"redacted": marker})
        calls.filter(raw_arguments__isnull=False).update(raw_arguments=marker)
        calls.exclude(error="").update(error="")
        # The reviewer's words quote or describe the call; the decision stays.
        ToolApproval.objects.filter(tool_call__conversation=conversation).exclude(reason="").update(
            reason=""
        )
        Run.objects.filter(conversation=conversation).update(error_message="", final_content="")
        # Files are contents too: the references go, and the files nothing else references.
        files = referenced_attachments(conversation=conversation)
        MessageAttachment.objects.filter(message__conversation=conversation).delete()
        unreferenced_attachments(ids=files).delete()
        # Feedback comments and tags are the user's words about the contents.
        Feedback.objects.filter(
            Q(message__conversation=conversation)
            | Q(tool_call__conversation=conversation)
            | Q(run__conversation=conversation)
        ).update(comment="", tags=[])
        now = timezone.now()
        Conversation.objects.filter(pk=conversation.pk).update(
            title="", metadata={}, updated_at=now, redacted_at=now
        )
