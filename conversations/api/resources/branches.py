"""Branch endpoints: fork, edit a user message, regenerate the answer, list the family."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.http.response import HttpResponseBase
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors
from conversations.models import Conversation
from conversations.services import history, submit_message
from conversations.services.loop import uses_workers

from ..errors import blame_configuration
from ..responses import AUTH_ERRORS, ERR_400, ERR_404
from ..responses import error_response as _error
from ..schema import CREATED_LOCATION, EVENT_STREAM, document
from ..serializers import (
    ConversationSerializer,
    MessageInputSerializer,
    PostMessageResultSerializer,
)
from ..sse.posting import answer_with_events, take_stream_slot, wants_event_stream
from ..sse.slots import release_stream_slot
from ..sse.views import too_many_streams
from ..throttling import MessageRateThrottle
from .conversations import ConversationQueries
from .messages import run_answer

__all__ = ["BranchListView", "EditMessageView", "ForkView", "RegenerateView"]

ERR_409_SPLIT = _error(
    "The cut would leave a tool call without its result (`would_split_tool_call`)."
)


class ForkInputSerializer(serializers.Serializer[Any]):
    """Where to cut."""

    position = serializers.IntegerField(
        min_value=0,
        max_value=2**31 - 1,
        help_text="The last position copied into the branch (messages 0..position).",
    )


class TurnResultSerializer(PostMessageResultSerializer):
    """A branch and what its run produced."""

    conversation = ConversationSerializer(help_text="The new branch.")


class ForkView(ConversationQueries):
    """Copy the start of a conversation into a new branch."""

    @document(
        operation_id="conversations_fork",
        summary="Fork a conversation",
        description=(
            "Copies messages `0..position` (calls, their statuses and results; not runs) into "
            "a new conversation of yours, `forked_from` this one. 409 `would_split_tool_call` "
            "when a copied call's result lies after the cut."
        ),
        request=ForkInputSerializer,
        parameters=[CREATED_LOCATION],
        responses={
            201: ConversationSerializer,
            400: ERR_400,
            404: ERR_404,
            409: ERR_409_SPLIT,
            **AUTH_ERRORS,
        },
        tags=["branches"],
    )
    def post(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        serializer = ForkInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        branch = history.fork_conversation(
            conversation=conversation, position=serializer.validated_data["position"]
        )
        return self.show(branch.pk, status.HTTP_201_CREATED)


class _TurnView(ConversationQueries):
    """Answers like posting a message does, plus the branch."""

    def get_throttles(self) -> list[Any]:
        return [*super().get_throttles(), MessageRateThrottle()]

    def perform_content_negotiation(self, request: Any, force: bool = False) -> Any:
        # Errors before the stream starts stay JSON even when only SSE is accepted.
        return super().perform_content_negotiation(request, force or wants_event_stream(request))

    def answer(
        self, request: Request, make_branch: Callable[[], Conversation], content: str | None
    ) -> HttpResponseBase:
        """Make the branch (``make_branch``) and answer in it as posting a message does.

        Every refusal comes before the branch is made: a streaming answer's
        slot is taken first, and the budgets are checked by ``make_branch``.
        """
        queued = uses_workers()
        if wants_event_stream(request):
            slot = take_stream_slot(request)
            if slot is None:
                return too_many_streams()
            try:
                branch = make_branch()
            except BaseException:
                release_stream_slot(slot)
                raise
            answer = answer_with_events(request, branch, content, slot=slot)
            if isinstance(answer, HttpResponseBase):
                # The events do not name the branch the client has to open: the header does.
                url = reverse("conversations:conversation-detail", args=[branch.pk])
                answer["Location"] = request.build_absolute_uri(url)
                return answer
            run = answer  # the queue refused it: answered as without the header
        else:
            branch = make_branch()
            with blame_configuration():
                run = submit_message(conversation=branch, content=content)
        run = selectors.run_with_calls(run_id=run.pk)
        branch = self.annotated().get(pk=branch.pk)
        return run_answer(
            request, run, queued=queued, extra={"conversation": ConversationSerializer(branch).data}
        )


_TURN_RESPONSES: dict[Any, Any] = {
    201: TurnResultSerializer,
    (200, EVENT_STREAM): OpenApiResponse(
        OpenApiTypes.STR,
        description="Run events (SSE) with `Accept: text/event-stream`; the branch in `Location`.",
    ),
    202: _error("Queued for a worker (`celery` executor), with `url` and `events`."),
    400: ERR_400,
    404: ERR_404,
    **AUTH_ERRORS,
    429: _error(
        "Too many messages (`throttled`), no free event stream with `Accept: "
        "text/event-stream` (`too_many_streams`), `MAX_RUNS_PER_USER` runs already running "
        "(`too_many_runs`), or a blocking budget is used up "
        "(`budget_exceeded`); no branch made. See `Retry-After` (absent when the budget "
        "never resets)."
    ),
    502: _error("The provider failed (with the run and its messages)."),
    503: _error("The provider or the task queue is unavailable, or the profile is unusable."),
    504: _error("The provider timed out."),
}
_TURN_LOCATION = OpenApiParameter(
    "Location",
    OpenApiTypes.URI,
    OpenApiParameter.HEADER,
    response=[200, 201, 202],
    description="The URL of the new branch.",
)
_EDIT_RESPONSES: dict[Any, Any] = {
    **_TURN_RESPONSES,
    413: _error("The content is larger than allowed (`content_too_large`)."),
}


class EditMessageView(_TurnView):
    """Edit a user message: its new content is answered in a new branch."""

    @document(
        operation_id="conversations_messages_edit",
        summary="Edit a user message (in a new branch)",
        description=(
            "Forks just before the user message at `position` and posts `content` in the "
            "branch, running the tool loop as posting a message does (201, 202 or a "
            "provider failure). The original conversation is not changed. "
            "`Accept: text/event-stream` streams the run as posting a message does."
        ),
        request=MessageInputSerializer,
        parameters=[_TURN_LOCATION],
        responses=_EDIT_RESPONSES,
        tags=["branches"],
    )
    def post(self, request: Request, conversation_id: Any, position: int) -> HttpResponseBase:
        conversation = self.get_conversation(conversation_id)
        serializer = MessageInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return self.answer(
            request,
            partial(history.branch_for_edit, conversation=conversation, position=position),
            serializer.validated_data["content"],
        )


class RegenerateView(_TurnView):
    """Answer the last user message again, in a new branch."""

    @document(
        operation_id="conversations_regenerate",
        summary="Regenerate the last answer (in a new branch)",
        description=(
            "Forks just after the last user message and runs the tool loop again in the "
            "branch; answers as posting a message does (also its event stream with "
            "`Accept: text/event-stream`). 400 `nothing_to_regenerate` without a user message."
        ),
        request=None,
        parameters=[_TURN_LOCATION],
        responses=_TURN_RESPONSES,
        tags=["branches"],
    )
    def post(self, request: Request, conversation_id: Any) -> HttpResponseBase:
        conversation = self.get_conversation(conversation_id)
        return self.answer(
            request, partial(history.branch_for_regenerate, conversation=conversation), None
        )


class BranchListView(ConversationQueries):
    """Every conversation of the family this one belongs to."""

    @document(
        operation_id="conversations_branches",
        summary="List the branches of a conversation's family",
        description="The root first, then each branch in creation order, with where it forked.",
        responses={200: ConversationSerializer(many=True), 404: ERR_404, **AUTH_ERRORS},
        tags=["branches"],
    )
    def get(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        family = selectors.conversation_family(
            conversations=self.annotated(), conversation=conversation
        )
        return Response(ConversationSerializer(family, many=True).data)
