"""Datasets from the record: rated conversations as fine-tuning lines and preference pairs.

Three formats, one JSON object per line:

- ``openai-chat``: OpenAI's chat fine-tuning format: ``messages`` (the
  profile's system prompt, then the history up to its last final answer,
  tool calls with their arguments as JSON text, every call answered) and
  ``tools`` (the functions called); an answer rated down gets ``weight: 0``
  so it is shown as context, not learned.
- ``openai-dpo``: OpenAI's preference format (``input``,
  ``preferred_output``, ``non_preferred_output``) from sibling branches: two
  answers to the same prefix (a regenerated answer and the one it
  replaced), one rated up, the other down.
- ``jsonl``: the app's own shape: the conversation's id, profile, messages
  (as ``ChatMessage.to_dict`` gives them; an assistant turn with the
  ``provider_tool_calls`` and ``citations`` the API shows on it) and every
  feedback on it.

Redacted conversations (``redacted_at``, or a message that holds the
redaction marker) never appear; nor do evaluation conversations unless
asked for. Rows are read conversation by conversation, so memory does not
grow with the export.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.models import Exists, OuterRef, Q, QuerySet

from conversations import domain
from conversations.conf import app_settings
from conversations.exceptions import InvalidArgumentError
from conversations.models import Conversation, Feedback, Message, Profile
from conversations.selectors import history_for_provider
from conversations.selectors.export import citation_item, provider_tool_call_item
from conversations.tools import registry

__all__ = [
    "DATASET_FORMATS",
    "RATINGS",
    "DatasetQuery",
    "dataset_conversations",
    "dataset_lines",
]

DATASET_FORMATS: Final = ("openai-chat", "openai-dpo", "jsonl")
"""The export formats, as ``?format=`` and ``--format`` name them."""

RATINGS: Final = ("up", "down", "any")
"""``rated``: ``up`` (rated, and never down), ``down`` (rated down at least once), ``any``."""


@dataclass(frozen=True, slots=True)
class DatasetQuery:
    """Which conversations an export reads."""

    owner: Any = None
    """Only this user's conversations; ``None`` for everyone's (staff)."""
    rated: str | None = None
    """One of :data:`RATINGS`, or ``None`` for rated or not."""
    profile: str | None = None
    """Only conversations on the profile with this slug."""
    date_from: datetime | None = None
    """Only conversations created at or after this moment."""
    date_to: datetime | None = None
    """Only conversations created before this moment."""
    evaluations: bool = False
    """Include evaluation conversations."""


def _feedback_of(value: int | None) -> Exists:
    rows = Feedback.objects.filter(
        Q(message__conversation=OuterRef("pk"))
        | Q(tool_call__conversation=OuterRef("pk"))
        | Q(run__conversation=OuterRef("pk"))
    )
    if value is not None:
        rows = rows.filter(value=value)
    return Exists(rows)


def dataset_conversations(*, query: DatasetQuery) -> QuerySet[Conversation]:
    """The conversations an export of ``query`` reads, oldest first."""
    if query.rated is not None and query.rated not in RATINGS:
        raise InvalidArgumentError(
            f"rated must be one of {', '.join(RATINGS)}, got {query.rated!r}",
            code="invalid_rated",
            field="rated",
        )
    marker = app_settings().REDACTION_MARKER
    rows = Conversation.objects.filter(redacted_at__isnull=True).exclude(
        Exists(Message.objects.filter(conversation=OuterRef("pk"), content=marker))
    )
    if query.owner is not None:
        rows = rows.filter(owner=query.owner)
    if not query.evaluations:
        rows = rows.filter(kind=Conversation.Kind.CHAT)
    if query.profile:
        rows = rows.filter(profile__slug=query.profile)
    if query.date_from is not None:
        rows = rows.filter(created_at__gte=query.date_from)
    if query.date_to is not None:
        rows = rows.filter(created_at__lt=query.date_to)
    if query.rated == "up":
        rows = rows.filter(_feedback_of(1)).exclude(_feedback_of(-1))
    elif query.rated == "down":
        rows = rows.filter(_feedback_of(-1))
    elif query.rated == "any":
        rows = rows.filter(_feedback_of(None))
    return rows.select_related("profile").order_by("created_at", "pk")


def dataset_lines(
    *, query: DatasetQuery, format: str, progress: Callable[[], None] | None = None
) -> Iterator[dict[str, Any]]:
    """The lines of the export of ``query`` in ``format``, one dict each.

    ``progress`` is called once per conversation read (a command's progress bar).
    """
    if format not in DATASET_FORMATS:
        raise InvalidArgumentError(
            f"format must be one of {', '.join(DATASET_FORMATS)}, got {format!r}",
            code="invalid_format",
            field="format",
        )
    conversations = dataset_conversations(query=query)
    if format == "openai-dpo":
        yield from _preference_pairs(conversations, progress)
        return
    for conversation in conversations.iterator(chunk_size=200):
        line = _chat_line(conversation) if format == "openai-chat" else _own_line(conversation)
        if progress is not None:
            progress()
        if line is not None:
            yield line


# The history as OpenAI's fine-tuning messages ----------------------------------------------------


def _ratings(conversation: Conversation) -> dict[int, int]:
    """Each rated message's pk -> the sign of its feedback (down wins over up)."""
    ratings: dict[int, int] = {}
    for message_id, value in Feedback.objects.filter(
        message__conversation=conversation
    ).values_list("message_id", "value"):
        assert message_id is not None
        ratings[message_id] = min(value, ratings.get(message_id, value))
    return ratings


def _wire(message: domain.ChatMessage) -> dict[str, Any]:
    data = message.to_dict()
    if message.role == domain.Role.ASSISTANT and data.get("tool_calls") and not data["content"]:
        data["content"] = None
    data.pop("is_error", None)
    return data


def _tools(history: Sequence[domain.ChatMessage]) -> list[dict[str, Any]]:
    names: list[str] = []
    for message in history:
        for call in message.tool_calls or ():
            if call.name not in names:
                names.append(call.name)
    tools = []
    for name in names:
        found = registry.get(name)
        spec = found.spec if found is not None else domain.ToolSpec(name=name)
        function: dict[str, Any] = {"name": spec.name, "parameters": dict(spec.parameters)}
        if spec.description:
            function["description"] = spec.description
        tools.append({"type": "function", "function": function})
    return tools


def _profile(conversation: Conversation) -> Profile | None:
    return conversation.profile


def _chat_line(conversation: Conversation) -> dict[str, Any] | None:
    rows = list(
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .values_list("pk", "role", "content")
    )
    history = history_for_provider(conversation=conversation, profile=_profile(conversation))
    offset = len(history) - len(rows)  # the system prompt, when the profile has one
    # The example ends with the last final answer: an assistant message that calls nothing.
    last = max(
        (
            index
            for index, message in enumerate(history)
            if message.role == domain.Role.ASSISTANT and not message.tool_calls and message.content
        ),
        default=None,
    )
    if last is None:
        return None
    ratings = _ratings(conversation)
    messages = []
    for index, message in enumerate(history[: last + 1]):
        data = _wire(message)
        if index >= offset and ratings.get(rows[index - offset][0]) == -1:
            data["weight"] = 0
        messages.append(data)
    line: dict[str, Any] = {"messages": messages}
    tools = _tools(history[: last + 1])
    if tools:
        line["tools"] = tools
        line["parallel_tool_calls"] = True
    return line


def _own_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The history as ``to_dict`` gives it, an assistant turn with what the provider did for it."""
    history = history_for_provider(conversation=conversation, profile=None)
    rows = (
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .only("pk")
        .prefetch_related("provider_tool_calls", "citations")
    )
    messages = []
    for message, row in zip(history, rows, strict=True):
        data = message.to_dict()
        calls, citations = row.provider_tool_calls.all(), row.citations.all()
        if calls:
            data["provider_tool_calls"] = [provider_tool_call_item(call) for call in calls]
        if citations:
            data["citations"] = [citation_item(citation) for citation in citations]
        messages.append(data)
    return messages


def _own_line(conversation: Conversation) -> dict[str, Any]:
    feedback = Feedback.objects.filter(
        Q(message__conversation=conversation)
        | Q(tool_call__conversation=conversation)
        | Q(run__conversation=conversation)
    ).select_related("message", "tool_call")
    return {
        "conversation": str(conversation.pk),
        "profile": conversation.profile.slug if conversation.profile else None,
        "created_at": conversation.created_at.isoformat(),
        "messages": _own_messages(conversation),
        "feedback": [
            {
                "value": row.value,
                "comment": row.comment,
                "tags": row.tags,
                "position": row.message.position if row.message is not None else None,
                "tool_call_id": row.tool_call.call_id if row.tool_call is not None else None,
                "run": str(row.run_id) if row.run_id is not None else None,
            }
            for row in feedback
        ],
    }


# Preference pairs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Answer:
    conversation: Conversation
    prefix: tuple[domain.ChatMessage, ...]
    answer: domain.ChatMessage
    value: int
    rated_at: datetime


def _prefix_key(root: Any, prefix: Sequence[domain.ChatMessage]) -> tuple[Any, str]:
    text = json.dumps([message.to_dict() for message in prefix], sort_keys=True, default=str)
    return root, hashlib.sha256(text.encode()).hexdigest()


def _rated_answers(conversation: Conversation) -> Iterator[_Answer]:
    ratings = dict(
        Feedback.objects.filter(message__conversation=conversation).values_list(
            "message__position", "value"
        )
    )
    if not ratings:
        return
    rated_at = dict(
        Feedback.objects.filter(message__conversation=conversation).values_list(
            "message__position", "updated_at"
        )
    )
    history = history_for_provider(conversation=conversation, profile=None)
    for position, value in ratings.items():
        answer = history[position]
        if answer.role != domain.Role.ASSISTANT or not answer.content:
            continue
        # The prefix ends with the user message this answer's turn began with.
        start = max(
            (i for i in range(position) if history[i].role == domain.Role.USER), default=None
        )
        if start is None:
            continue
        yield _Answer(conversation, tuple(history[: start + 1]), answer, value, rated_at[position])


def _preference_pairs(
    conversations: QuerySet[Conversation], progress: Callable[[], None] | None
) -> Iterator[dict[str, Any]]:
    groups: dict[tuple[Any, str], list[_Answer]] = {}
    for conversation in conversations.iterator(chunk_size=200):
        if progress is not None:
            progress()
        for answer in _rated_answers(conversation):
            key = _prefix_key(conversation.branch_root_id or conversation.pk, answer.prefix)
            groups.setdefault(key, []).append(answer)
    for answers in groups.values():
        ups = sorted((a for a in answers if a.value > 0), key=lambda a: a.rated_at)
        downs = sorted((a for a in answers if a.value < 0), key=lambda a: a.rated_at)
        for up, down in zip(ups, downs, strict=False):
            if up.answer.content == down.answer.content:
                continue
            profile = _profile(up.conversation)
            system = (
                [{"role": "system", "content": profile.system_prompt}]
                if profile is not None and profile.system_prompt
                else []
            )
            tools = _tools(up.prefix)
            yield {
                "input": {
                    "messages": [*system, *(_wire(message) for message in up.prefix)],
                    "tools": tools,
                    "parallel_tool_calls": True,
                },
                "preferred_output": [{"role": "assistant", "content": up.answer.content}],
                "non_preferred_output": [{"role": "assistant", "content": down.answer.content}],
            }
