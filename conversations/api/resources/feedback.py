"""Feedback and scores: thumbs on an answer, a tool call or a run, and scores given to a run.

Feedback is the caller's own: one row per user and target, replaced by a
second ``PUT`` and removed by ``DELETE``. Another user's message, call or
run is a 404; feedback on a message that is not an assistant's is a 400
(``not_an_answer``). Scores are written by staff and by holders of
``conversations.add_score``; a run's owner may read them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import Http404
from django.urls import reverse
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors
from conversations.models import (
    MAX_TAG_LENGTH,
    MAX_TAGS,
    Feedback,
    Run,
    Score,
    ScoreSource,
)
from conversations.services.feedback import (
    MAX_COMMENT_LENGTH,
    FeedbackTarget,
    add_score,
    clear_feedback,
    set_feedback,
)

from ..base import ConversationsAPIView
from ..responses import AUTH_ERRORS, ERR_400, ERR_404
from ..responses import error_response as _error
from ..schema import CREATED_LOCATION, document

__all__ = [
    "ConversationFeedbackView",
    "FeedbackInputSerializer",
    "FeedbackSerializer",
    "MessageFeedbackView",
    "RunFeedbackView",
    "RunScoresView",
    "ScoreInputSerializer",
    "ScoreSerializer",
    "ToolCallFeedbackView",
]

SCORE_PERMISSION = "conversations.add_score"
"""The permission (besides being staff) that lets a user score any run."""


class FeedbackInputSerializer(serializers.Serializer[Any]):
    """A thumbs up or down, with an optional comment and tags."""

    value = serializers.IntegerField(help_text="1 (up) or -1 (down).")
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_COMMENT_LENGTH, default=""
    )
    tags = serializers.ListField(
        child=serializers.CharField(max_length=MAX_TAG_LENGTH),
        required=False,
        max_length=MAX_TAGS,
        default=list,
        help_text=f"Up to {MAX_TAGS} short labels (`wrong_tool`, `too_long` ...).",
    )


class FeedbackSerializer(serializers.Serializer[Any]):
    """One feedback row and the target it judges."""

    id = serializers.IntegerField()
    value = serializers.IntegerField(help_text="1 (up) or -1 (down).")
    comment = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    target = serializers.SerializerMethodField(
        help_text='`{"kind": "message", "position": 3}`, `{"kind": "tool_call", "id": 12}` '
        'or `{"kind": "run", "id": "<uuid>"}`.'
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_target(self, row: Feedback) -> dict[str, Any]:
        if row.message is not None:
            return {"kind": "message", "position": row.message.position}
        if row.tool_call_id is not None:
            return {"kind": "tool_call", "id": row.tool_call_id}
        return {"kind": "run", "id": str(row.run_id)}


class ScoreInputSerializer(serializers.Serializer[Any]):
    """A score to give a run."""

    name = serializers.CharField(max_length=100)
    value = serializers.JSONField(help_text="A number, a boolean or a label (text).")
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=ScoreSource.choices, default=ScoreSource.ADMIN
    )
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_COMMENT_LENGTH, default=""
    )


class ScoreSerializer(serializers.Serializer[Any]):
    """One score of a run or of one of its messages."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    value = serializers.JSONField(help_text="A number, a boolean or a label.")
    source = serializers.CharField()  # type: ignore[assignment]
    comment = serializers.CharField()
    position = serializers.SerializerMethodField(
        help_text="The scored message's position; null when the score is the whole run's."
    )
    evaluation = serializers.IntegerField(source="evaluation_id", allow_null=True)
    created_at = serializers.DateTimeField()

    def get_position(self, row: Score) -> int | None:
        return row.message.position if row.message is not None else None


_RESPONSES = {
    400: _error("Not an assistant's message (`not_an_answer`) or a bad value (`invalid`)."),
    404: ERR_404,
    **AUTH_ERRORS,
}


class _FeedbackView(ConversationsAPIView):
    """GET, PUT and DELETE of the caller's feedback on one target."""

    def target(self, request: Request, **kwargs: Any) -> FeedbackTarget | None:
        """The caller's target named by the URL, else ``None``."""
        raise NotImplementedError

    def _found(self, request: Request, **kwargs: Any) -> FeedbackTarget:
        found = self.target(request, **kwargs)
        if found is None:
            raise Http404
        return found

    def get(self, request: Request, **kwargs: Any) -> Response:
        target = self._found(request, **kwargs)
        row = selectors.feedback_on(user=request.user, target=target)
        if row is None:
            raise Http404
        return Response(FeedbackSerializer(row).data)

    def put(self, request: Request, **kwargs: Any) -> Response:
        target = self._found(request, **kwargs)
        data = FeedbackInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        row, created = set_feedback(user=request.user, target=target, **data.validated_data)
        if row.message_id is not None:
            row = Feedback.objects.select_related("message").get(pk=row.pk)
        return Response(
            FeedbackSerializer(row).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    def delete(self, request: Request, **kwargs: Any) -> Response:
        clear_feedback(user=request.user, target=self._found(request, **kwargs))
        return Response(status=status.HTTP_204_NO_CONTENT)


_Handler = Callable[..., Response]


def _docs(kind: str, what: str) -> dict[str, Callable[[_Handler], _Handler]]:
    return {
        "get": document(
            operation_id=f"{kind}_feedback_retrieve",
            summary=f"Show your feedback on {what}",
            responses={200: FeedbackSerializer, 404: ERR_404, **AUTH_ERRORS},
            tags=["feedback"],
        ),
        "put": document(
            operation_id=f"{kind}_feedback_update",
            summary=f"Give feedback on {what}",
            description="Creates your feedback (201) or replaces it (200): one per user and "
            "target.",
            request=FeedbackInputSerializer,
            responses={200: FeedbackSerializer, 201: FeedbackSerializer, **_RESPONSES},
            tags=["feedback"],
        ),
        "delete": document(
            operation_id=f"{kind}_feedback_destroy",
            summary=f"Remove your feedback on {what}",
            description="204 whether or not there was feedback to remove.",
            request=None,
            responses={204: None, 404: ERR_404, **AUTH_ERRORS},
            tags=["feedback"],
        ),
    }


_MESSAGE_DOCS = _docs("messages", "an assistant's message (by position)")
_CALL_DOCS = _docs("tool_calls", "a tool call (by `pk`)")
_RUN_DOCS = _docs("runs", "a run")


class MessageFeedbackView(_FeedbackView):
    """Feedback on the assistant's message at a position of one of your conversations."""

    def target(self, request: Request, **kwargs: Any) -> FeedbackTarget | None:
        return selectors.owned_message(
            user=request.user,
            conversation_id=kwargs["conversation_id"],
            position=kwargs["position"],
        )

    @_MESSAGE_DOCS["get"]
    def get(self, request: Request, **kwargs: Any) -> Response:
        return super().get(request, **kwargs)

    @_MESSAGE_DOCS["put"]
    def put(self, request: Request, **kwargs: Any) -> Response:
        return super().put(request, **kwargs)

    @_MESSAGE_DOCS["delete"]
    def delete(self, request: Request, **kwargs: Any) -> Response:
        return super().delete(request, **kwargs)


class ToolCallFeedbackView(_FeedbackView):
    """Feedback on one tool call of one of your conversations."""

    def target(self, request: Request, **kwargs: Any) -> FeedbackTarget | None:
        return selectors.owned_tool_call(user=request.user, tool_call_id=kwargs["tool_call_id"])

    @_CALL_DOCS["get"]
    def get(self, request: Request, **kwargs: Any) -> Response:
        return super().get(request, **kwargs)

    @_CALL_DOCS["put"]
    def put(self, request: Request, **kwargs: Any) -> Response:
        return super().put(request, **kwargs)

    @_CALL_DOCS["delete"]
    def delete(self, request: Request, **kwargs: Any) -> Response:
        return super().delete(request, **kwargs)


class RunFeedbackView(_FeedbackView):
    """Feedback on one run of one of your conversations."""

    def target(self, request: Request, **kwargs: Any) -> FeedbackTarget | None:
        return selectors.owned_run(user=request.user, run_id=kwargs["run_id"])

    @_RUN_DOCS["get"]
    def get(self, request: Request, **kwargs: Any) -> Response:
        return super().get(request, **kwargs)

    @_RUN_DOCS["put"]
    def put(self, request: Request, **kwargs: Any) -> Response:
        return super().put(request, **kwargs)

    @_RUN_DOCS["delete"]
    def delete(self, request: Request, **kwargs: Any) -> Response:
        return super().delete(request, **kwargs)


class ConversationFeedbackView(ConversationsAPIView):
    """Your feedback on the answers, calls and runs of one of your conversations."""

    @document(
        operation_id="conversations_feedback_list",
        summary="List your feedback in a conversation",
        description="Oldest first, every row with its target (what a page needs to show "
        "the thumbs it left).",
        responses={200: FeedbackSerializer(many=True), 404: ERR_404, **AUTH_ERRORS},
        tags=["feedback"],
    )
    def get(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        rows = selectors.conversation_feedback(user=request.user, conversation_id=conversation.pk)
        return Response(FeedbackSerializer(rows, many=True).data)


def _may_score(user: Any) -> bool:
    return bool(user.is_staff or user.has_perm(SCORE_PERMISSION))


class RunScoresView(ConversationsAPIView):
    """The scores of a run: read by its owner and scorers, written by scorers."""

    def _run(self, request: Request, run_id: Any) -> Run:
        runs = (
            Run.objects.all()
            if _may_score(request.user)
            else selectors.owned_runs(user=request.user)
        )
        run = runs.filter(pk=run_id).first()
        if run is None:
            raise Http404
        return run

    @document(
        operation_id="runs_scores_list",
        summary="List a run's scores",
        description="The scores of the run and of its messages, oldest first. Visible to "
        "the run's owner, staff and holders of `conversations.add_score`.",
        responses={200: ScoreSerializer(many=True), 404: ERR_404, **AUTH_ERRORS},
        tags=["feedback"],
    )
    def get(self, request: Request, run_id: Any) -> Response:
        run = self._run(request, run_id)
        rows = selectors.run_scores(run=run).select_related("message")
        return Response(ScoreSerializer(rows, many=True).data)

    @document(
        operation_id="runs_scores_create",
        summary="Score a run",
        description="For staff and holders of `conversations.add_score` (any run); the "
        "run's owner without either gets 403 `permission_denied`, anyone else 404.",
        request=ScoreInputSerializer,
        parameters=[CREATED_LOCATION],
        responses={201: ScoreSerializer, 400: ERR_400, 404: ERR_404, **AUTH_ERRORS},
        tags=["feedback"],
    )
    def post(self, request: Request, run_id: Any) -> Response:
        run = self._run(request, run_id)
        if not _may_score(request.user):
            raise PermissionDenied("Scoring runs needs the conversations.add_score permission.")
        data = ScoreInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        score = add_score(target=run, created_by=request.user, **data.validated_data)
        url = request.build_absolute_uri(reverse("conversations:run-scores", args=[run.pk]))
        return Response(
            ScoreSerializer(score).data, status=status.HTTP_201_CREATED, headers={"Location": url}
        )
