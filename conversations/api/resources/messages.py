"""A conversation's messages: list them, and post one (the run's answer, queued or streamed).

Every query is scoped to ``owner=request.user``; another user's conversation,
message or run is a 404. Errors leave through ``errors.exception_handler``.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.http.response import HttpResponseBase
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors
from conversations.models import Run
from conversations.services import submit_message
from conversations.services.loop import uses_workers

from ..base import ConversationsAPIView
from ..errors import blame_configuration, error_body, status_for_code
from ..pagination import MessagePagination
from ..responses import (
    AUTH_ERRORS,
    ERR_400,
    ERR_400_LIST,
    ERR_404,
    ERR_409,
)
from ..responses import error_response as _error
from ..schema import CREATED_LOCATION, EVENT_STREAM, document
from ..serializers import (
    MessageInputSerializer,
    MessageListQuerySerializer,
    MessageSerializer,
    PostMessageResultSerializer,
    QueuedRunSerializer,
    RunFailureSerializer,
    RunSerializer,
)
from ..sse.posting import answer_with_events, wants_event_stream
from ..throttling import MessageRateThrottle
from .outputs import requested_schema


def _failure_status(run: Run) -> int | None:
    """502/503/504 for a run the provider made fail (the loop returns it, not raises)."""
    if run.status != Run.Status.FAILED:
        return None
    code = status_for_code(run.error_code)
    return code if code is not None and code >= 500 else None


def run_answer(
    request: Request, run: Run, *, queued: bool, extra: dict[str, Any] | None = None
) -> Response:
    """How the API answers a turn it submitted: the run, its messages and ``extra``.

    201 when the run was executed here, 202 with the run's URL and event stream
    when a worker has it, and the provider's 502/503/504 (with the same body)
    when the provider made it fail. ``run`` is loaded by ``selectors.run_with_calls``.
    """
    result = {
        **(extra or {}),
        "run": RunSerializer(run).data,
        "messages": MessageSerializer(selectors.run_messages(run=run), many=True).data,
    }
    failure = _failure_status(run)
    if failure is not None:
        body = error_body(run.error_code, run.error_message)
        return Response({**body, **result}, status=failure)
    url = request.build_absolute_uri(reverse("conversations:run-detail", args=[run.pk]))
    if not queued:
        return Response(result, status=status.HTTP_201_CREATED, headers={"Location": url})
    events = request.build_absolute_uri(reverse("conversations:run-events", args=[run.pk]))
    return Response(
        {**result, "url": url, "events": events},
        status=status.HTTP_202_ACCEPTED,
        headers={"Location": url},
    )


# Conversations ----------------------------------------------------------------------------


class ConversationMessagesView(ConversationsAPIView):
    """The history of a conversation, and posting the next user message."""

    pagination_class = MessagePagination

    def get_throttles(self) -> list[Any]:
        if self.request.method == "POST":
            return [*super().get_throttles(), MessageRateThrottle()]
        return super().get_throttles()

    def perform_content_negotiation(self, request: Any, force: bool = False) -> Any:
        # A client asking for the event stream gets JSON for anything but it.
        return super().perform_content_negotiation(request, force or wants_event_stream(request))

    @document(
        operation_id="conversations_messages_list",
        summary="List the messages of a conversation",
        description="Oldest first, by position; `after` returns only newer ones (polling).",
        parameters=[MessageListQuerySerializer],
        responses={
            200: MessageSerializer(many=True),
            400: ERR_400_LIST,
            404: ERR_404,
            **AUTH_ERRORS,
        },
        tags=["messages"],
    )
    def get(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        query = self.query(MessageListQuerySerializer)
        messages = selectors.conversation_messages(
            conversation=conversation, after=query.get("after")
        )
        page = self.paginate_queryset(messages)
        return self.get_paginated_response(MessageSerializer(page, many=True).data)

    @document(
        operation_id="conversations_messages_create",
        summary="Send a message and run the tool loop",
        description=(
            "With the `inline` executor (the default) the request runs the tool loop to its "
            "end and answers 201 with the run and the messages it added. When the provider "
            "fails, the run ends `failed` and the answer is 502, 503 or 504 with the "
            "provider's code, the run and its messages.\n\n"
            "With the `celery` executor the user message is stored, the run is queued for a "
            "worker and the answer is 202 with the run (`running`), the messages stored so "
            "far, the run's `url` (also in `Location`) and its `events` stream "
            "(`GET /runs/{id}/events/`, Server-Sent Events); 503 `executor_unavailable` "
            "when the task queue refused the run.\n\n"
            "A budget used up during the run ends it `budget_exhausted` (201 with the run).\n\n"
            "`Accept: text/event-stream`: 200 with the run's events (those of "
            "`GET /runs/{id}/events/`); errors stay JSON, a provider failure is `run_finished`."
        ),
        request=MessageInputSerializer,
        parameters=[CREATED_LOCATION],
        responses={
            201: PostMessageResultSerializer,
            (200, EVENT_STREAM): OpenApiResponse(OpenApiTypes.STR, description="Run events (SSE)."),
            202: OpenApiResponse(
                QueuedRunSerializer, description="Queued for a worker (`celery` executor)."
            ),
            400: ERR_400,
            **AUTH_ERRORS,
            404: ERR_404,
            409: ERR_409,
            413: _error(
                "The content is larger than allowed (`content_too_large`), or a file is larger "
                "than the profile's provider takes inline (`attachment_too_large_for_provider`; "
                "the run ends failed before any request)."
            ),
            429: _error(
                "Too many messages (`throttled`), `MAX_RUNS_PER_USER` runs already running "
                "(`too_many_runs`), or a blocking budget is used up (`budget_exceeded`); no "
                "run started. See `Retry-After` (absent when the budget never resets)."
            ),
            502: OpenApiResponse(RunFailureSerializer, description="The provider failed."),
            503: OpenApiResponse(
                RunFailureSerializer,
                description="The provider is unreachable or rate-limited (with the run), or "
                "the profile is unusable (`configuration_error` or the code of the adapter "
                "refusing it, such as `unknown_tool_choice`; no run, nothing answered), or "
                "the task queue refused the run (`executor_unavailable`, `celery` executor; "
                "with the failed run and the stored user message).",
            ),
            504: OpenApiResponse(RunFailureSerializer, description="The provider timed out."),
        },
        tags=["messages"],
    )
    def post(self, request: Request, conversation_id: Any) -> HttpResponseBase:
        conversation = self.get_conversation(conversation_id)
        serializer = MessageInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        queued = uses_workers()
        content = serializer.validated_data["content"]
        attachments = selectors.resolve_attachments(
            owner=conversation.owner_id, ids=serializer.validated_data["attachments"]
        )
        schema = requested_schema(request, serializer.validated_data.get("output_schema"))
        if wants_event_stream(request):
            answer = answer_with_events(
                request, conversation, content, output_schema=schema, attachments=attachments
            )
            if isinstance(answer, HttpResponseBase):
                return answer
            run = answer  # ended before it started: answered as without the header
        else:
            with blame_configuration():
                run = submit_message(
                    conversation=conversation,
                    content=content,
                    output_schema=schema,
                    attachments=attachments,
                )
        try:
            run = selectors.run_with_calls(run_id=run.pk)
        except Run.DoesNotExist:
            # The conversation was deleted while the run executed.
            raise Http404 from None
        return run_answer(request, run, queued=queued)


# Runs -----------------------------------------------------------------------------------------
