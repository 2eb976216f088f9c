"""The REST API's views: validate the input, call one service, serialise the output.

Every query is scoped to ``owner=request.user``; another user's conversation,
message or run is a 404. Errors leave through ``errors.exception_handler``.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors
from conversations.models import Run
from conversations.services import cancel_run, create_conversation, submit_message
from conversations.services import history as operations
from conversations.services.loop import uses_workers
from conversations.services.usage import ensure_within_budgets

from .base import ConversationsAPIView
from .errors import APIError, blame_configuration, error_body, error_item, status_for_code
from .limits import check_import_values
from .message_stream import answer_with_events, wants_event_stream
from .pagination import ConversationPagination, MessagePagination, RunPagination
from .responses import (
    AUTH_ERRORS,
    ERR_400,
    ERR_400_LIST,
    ERR_404,
    ERR_409,
    ERR_409_ENDED,
)
from .responses import error_response as _error
from .schema import CREATED_LOCATION, EVENT_STREAM, document
from .serializers import (
    ConversationInputSerializer,
    ConversationListQuerySerializer,
    ConversationSerializer,
    ImportInputSerializer,
    MessageInputSerializer,
    MessageListQuerySerializer,
    MessageSerializer,
    PostMessageResultSerializer,
    ProfileSerializer,
    QueuedRunSerializer,
    RunFailureSerializer,
    RunListQuerySerializer,
    RunSerializer,
    ToolSerializer,
)
from .throttling import MessageRateThrottle

__all__ = [
    "ConversationDetailView",
    "ConversationExportView",
    "ConversationImportView",
    "ConversationListView",
    "ConversationMessagesView",
    "ConversationRunsView",
    "ProfileListView",
    "RunCancelView",
    "RunDetailView",
    "ToolListView",
]


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


class _ConversationQueries(ConversationsAPIView):
    def annotated(self) -> Any:
        """The user's conversations with message count and last run, in one query."""
        return selectors.conversations_with_summary(conversations=self.owned_conversations())

    def show(self, conversation_id: Any, status_code: int = status.HTTP_200_OK) -> Response:
        conversation = get_object_or_404(self.annotated(), pk=conversation_id)
        headers: dict[str, str] = {}
        if status_code == status.HTTP_201_CREATED:
            url = reverse("conversations:conversation-detail", args=[conversation.pk])
            headers["Location"] = self.request.build_absolute_uri(url)
        data = ConversationSerializer(conversation).data
        return Response(data, status=status_code, headers=headers)


class ConversationListView(_ConversationQueries):
    """The user's conversations."""

    pagination_class = ConversationPagination

    @document(
        operation_id="conversations_list",
        summary="List your conversations",
        description="Most recently updated first; cursor pagination; `q` searches titles; "
        "branches are listed only with `branches=all`.",
        parameters=[ConversationListQuerySerializer],
        responses={200: ConversationSerializer(many=True), 400: ERR_400_LIST, **AUTH_ERRORS},
        tags=["conversations"],
    )
    def get(self, request: Request) -> Response:
        query = self.query(ConversationListQuerySerializer)
        conversations = self.annotated()
        if query.get("q"):
            conversations = conversations.filter(title__icontains=query["q"])
        if query["branches"] == "roots":
            conversations = conversations.filter(forked_from__isnull=True)
        page = self.paginate_queryset(conversations)
        return self.get_paginated_response(ConversationSerializer(page, many=True).data)

    @document(
        operation_id="conversations_create",
        summary="Start a conversation",
        request=ConversationInputSerializer,
        parameters=[CREATED_LOCATION],
        responses={201: ConversationSerializer, 400: ERR_400, **AUTH_ERRORS},
        tags=["conversations"],
    )
    def post(self, request: Request) -> Response:
        serializer = ConversationInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conversation = create_conversation(owner=request.user, **serializer.validated_data)
        return self.show(conversation.pk, status.HTTP_201_CREATED)


class ConversationDetailView(_ConversationQueries):
    """One of the user's conversations."""

    @document(
        operation_id="conversations_retrieve",
        summary="Show a conversation",
        responses={200: ConversationSerializer, 404: ERR_404, **AUTH_ERRORS},
        tags=["conversations"],
    )
    def get(self, request: Request, conversation_id: Any) -> Response:
        return self.show(conversation_id)

    @document(
        operation_id="conversations_update",
        summary="Change title, profile or metadata",
        request=ConversationInputSerializer(partial=True),
        responses={200: ConversationSerializer, 400: ERR_400, 404: ERR_404, **AUTH_ERRORS},
        tags=["conversations"],
    )
    def patch(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        serializer = ConversationInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        operations.update_conversation(conversation=conversation, **serializer.validated_data)
        return self.show(conversation.pk)

    @document(
        operation_id="conversations_destroy",
        summary="Delete a conversation and its history",
        request=None,
        responses={204: None, 404: ERR_404, 409: ERR_409, **AUTH_ERRORS},
        tags=["conversations"],
    )
    def delete(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        operations.delete_conversation(conversation=conversation)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationImportView(_ConversationQueries):
    """Create a conversation from a history in the OpenAI wire shape."""

    @document(
        operation_id="conversations_import",
        summary="Import a conversation",
        description=(
            "Validates every message (`ChatMessage.from_dict`) and the pairing rules, and "
            "saves all or nothing. An error answers 400 with the domain code (for example "
            "`unknown_tool_call_id`) and a JSON pointer such as `/messages/3/tool_call_id`."
        ),
        request=ImportInputSerializer,
        parameters=[CREATED_LOCATION],
        responses={201: ConversationSerializer, 400: ERR_400, **AUTH_ERRORS},
        tags=["conversations"],
    )
    def post(self, request: Request) -> Response:
        serializer = ImportInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        check_import_values(serializer.validated_data["messages"])
        conversation = operations.import_conversation(
            owner=request.user, **serializer.validated_data
        )
        return self.show(conversation.pk, status.HTTP_201_CREATED)


# Messages ------------------------------------------------------------------------------------


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
            413: _error("The content is larger than allowed (`content_too_large`)."),
            429: _error(
                "Too many messages (`throttled`), or a blocking budget is used up "
                "(`budget_exceeded`, no run started); see `Retry-After` (absent when the "
                "budget never resets)."
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
        ensure_within_budgets(
            user=request.user, profile=conversation.profile or selectors.get_default_profile()
        )
        queued = uses_workers()
        content = serializer.validated_data["content"]
        if wants_event_stream(request):
            answer = answer_with_events(request, conversation, content)
            if isinstance(answer, HttpResponseBase):
                return answer
            run = answer  # ended before it started: answered as without the header
        else:
            with blame_configuration():
                run = submit_message(conversation=conversation, content=content)
        try:
            run = selectors.run_with_calls(run_id=run.pk)
        except Run.DoesNotExist:
            # The conversation was deleted while the run executed.
            raise Http404 from None
        return run_answer(request, run, queued=queued)


# Runs -----------------------------------------------------------------------------------------


class ConversationRunsView(ConversationsAPIView):
    """The runs of a conversation."""

    pagination_class = RunPagination

    @document(
        operation_id="conversations_runs_list",
        summary="List the runs of a conversation",
        description="Newest first; `status` keeps only runs that ended (or are) so.",
        parameters=[RunListQuerySerializer],
        responses={200: RunSerializer(many=True), 400: ERR_400_LIST, 404: ERR_404, **AUTH_ERRORS},
        tags=["runs"],
    )
    def get(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        statuses = self.query(RunListQuerySerializer).get("status")
        runs = conversation.runs.filter(status__in=statuses or Run.Status.values)
        page = self.paginate_queryset(selectors.runs_with_calls(runs=runs))
        return self.get_paginated_response(RunSerializer(page, many=True).data)


class RunDetailView(ConversationsAPIView):
    """One run of one of the user's conversations."""

    @document(
        operation_id="runs_retrieve",
        summary="Show a run",
        responses={200: RunSerializer, 404: ERR_404, **AUTH_ERRORS},
        tags=["runs"],
    )
    def get(self, request: Request, run_id: Any) -> Response:
        runs = selectors.runs_with_calls(runs=selectors.owned_runs(user=request.user))
        return Response(RunSerializer(get_object_or_404(runs, pk=run_id)).data)


class RunCancelView(ConversationsAPIView):
    """Ask one of the user's running runs to stop."""

    @document(
        operation_id="runs_cancel",
        summary="Cancel a run",
        description=(
            "Asks the run to stop and answers 202 with the run as it is now. The loop stops "
            "at its next step boundary (before asking the model again, or between two "
            "tools; a tool already running finishes), answers its open calls as cancelled "
            "and ends the run `cancelled`. A run still waiting for a worker ends at once. "
            "409 `run_not_running` when the run has already ended."
        ),
        request=None,
        responses={202: RunSerializer, 404: ERR_404, 409: ERR_409_ENDED, **AUTH_ERRORS},
        tags=["runs"],
    )
    def post(self, request: Request, run_id: Any) -> Response:
        run = get_object_or_404(selectors.owned_runs(user=request.user), pk=run_id)
        cancel_run(run=run)
        run = selectors.run_with_calls(run_id=run.pk)
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


# Export -----------------------------------------------------------------------------------------


class ConversationExportView(ConversationsAPIView):
    """The request body a provider would be sent for this history (a dry run)."""

    @document(
        operation_id="conversations_export",
        summary="Export the history as a provider's request body",
        description=(
            "Exactly the JSON body the chosen adapter would send for the next turn (the "
            "profile's system prompt, the history, the tools and options it offers). "
            "Nothing is sent. `openai` is the Chat Completions body."
        ),
        parameters=[
            OpenApiParameter(
                "format",
                OpenApiTypes.STR,
                enum=list(operations.EXPORT_FORMATS),
                default="openai",
                description="Which provider's wire format.",
            )
        ],
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="The request body."),
            400: _error("Unknown format (`invalid_format`)."),
            404: ERR_404,
            503: _error(
                "The profile or stored history cannot be expressed in this format "
                "(`configuration_error` or the adapter's code, e.g. `unknown_tool_choice`)."
            ),
            **AUTH_ERRORS,
        },
        tags=["conversations"],
    )
    def get(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        fmt = request.query_params.get("format", "openai")
        if fmt not in operations.EXPORT_FORMATS:
            valid = ", ".join(operations.EXPORT_FORMATS)
            detail = f"Unknown format; valid formats: {valid}."
            raise APIError(
                detail,
                code="invalid_format",
                errors=[error_item("invalid_format", detail, parameter="format")],
            )
        with blame_configuration():
            payload = operations.export_payload(conversation=conversation, format=fmt)
        return Response(payload)


# Configuration ------------------------------------------------------------------------------------


class ToolListView(ConversationsAPIView):
    """The tools that are registered and enabled."""

    @document(
        operation_id="tools_list",
        summary="List the enabled tools",
        responses={200: ToolSerializer(many=True), **AUTH_ERRORS},
        tags=["configuration"],
    )
    def get(self, request: Request) -> Response:
        return Response(ToolSerializer(selectors.available_tools().values(), many=True).data)


class ProfileListView(ConversationsAPIView):
    """The active profiles (never a key nor a key reference)."""

    @document(
        operation_id="profiles_list",
        summary="List the active profiles",
        responses={200: ProfileSerializer(many=True), **AUTH_ERRORS},
        tags=["configuration"],
    )
    def get(self, request: Request) -> Response:
        profiles = selectors.active_profiles()
        default = selectors.get_default_profile()
        context = {"default_profile": default.slug if default else None}
        return Response(ProfileSerializer(profiles, many=True, context=context).data)
