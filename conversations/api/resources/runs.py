"""Runs: a conversation's runs, one run with its calls, and cancelling one.

Every query is scoped to ``owner=request.user``; another user's conversation,
message or run is a 404. Errors leave through ``errors.exception_handler``.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors
from conversations.models import Run
from conversations.services import cancel_run
from conversations.services.loop import resume_parent

from ..base import ConversationsAPIView
from ..pagination import RunPagination
from ..responses import (
    AUTH_ERRORS,
    ERR_400_LIST,
    ERR_404,
    ERR_409_ENDED,
)
from ..schema import document
from ..serializers import (
    RunListQuerySerializer,
    RunSerializer,
)


class ConversationRunsView(ConversationsAPIView):
    """The runs of a conversation."""

    pagination_class = RunPagination

    @document(
        operation_id="conversations_runs_list",
        summary="List the runs of a conversation",
        description="Newest first; `status` keeps only runs that ended (or are) so; "
        "`output_schema` only those asked to answer in that schema.",
        parameters=[RunListQuerySerializer],
        responses={200: RunSerializer(many=True), 400: ERR_400_LIST, 404: ERR_404, **AUTH_ERRORS},
        tags=["runs"],
    )
    def get(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        query = self.query(RunListQuerySerializer)
        runs = conversation.runs.filter(status__in=query.get("status") or Run.Status.values)
        if "output_schema" in query:
            runs = runs.filter(output_schema__sha256=query["output_schema"])
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
        # An agent's run that waited for an approval has ended: its caller goes on.
        resume_parent(run)
        run = selectors.run_with_calls(run_id=run.pk)
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


# Export -----------------------------------------------------------------------------------------
