"""The approval endpoints: the pending approvals a user may decide, and deciding one.

A call's approval is visible to the conversation's owner, and (staff-level
ones) to holders of ``conversations.approve_toolcall``; anyone else gets 404.
The owner of a staff-level call sees it but gets 403 ``approval_forbidden``.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors
from conversations.services import decide_approval
from conversations.services.loop import uses_workers

from ..approval_serializers import ApprovalSerializer
from ..base import ConversationsAPIView
from ..errors import APIError, blame_configuration
from ..pagination import ApprovalPagination
from ..responses import AUTH_ERRORS, ERR_400_LIST, ERR_401
from ..schema import document
from ..serializers import ErrorSerializer, RunSerializer

__all__ = [
    "ApprovalListView",
    "DecisionInputSerializer",
    "ToolCallApproveView",
    "ToolCallRejectView",
]


class DecisionInputSerializer(serializers.Serializer[Any]):
    """A rejection's optional reason (the model reads it)."""

    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, default="", trim_whitespace=True
    )


class DecisionResultSerializer(serializers.Serializer[Any]):
    """A stored decision and, for the conversation's owner, the run as it is now."""

    approval = ApprovalSerializer()
    run = RunSerializer(
        required=False,
        help_text="Only in the owner's answer: a reviewer of another user's conversation "
        "gets the decision and the call, never the owner's run.",
    )


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


class ApprovalListView(ConversationsAPIView):
    """Pending approvals the user may decide."""

    pagination_class = ApprovalPagination

    @document(
        operation_id="approvals_list",
        summary="List the approvals you may decide",
        description=(
            "Pending approvals of waiting runs, oldest first: owner-level calls of your "
            "conversations and, if you hold `conversations.approve_toolcall`, staff-level "
            "calls of other users' conversations. Cursor-paginated (`next`/`previous` "
            "links, `page_size` up to 100)."
        ),
        responses={200: ApprovalSerializer(many=True), 400: ERR_400_LIST, **AUTH_ERRORS},
        tags=["approvals"],
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(selectors.decidable_approvals(user=request.user))
        return self.get_paginated_response(ApprovalSerializer(page, many=True).data)


class _DecideView(ConversationsAPIView):
    approved: bool = True

    def post(self, request: Request, tool_call_id: int) -> Response:
        user = request.user
        approval = selectors.tool_call_approval(user=user, tool_call_id=tool_call_id)
        if approval is None:
            if selectors.owned_tool_call_exists(user=user, tool_call_id=tool_call_id):
                raise APIError(
                    "This tool call does not wait for an approval.",
                    code="no_approval",
                    status_code=status.HTTP_409_CONFLICT,
                )
            raise Http404
        # Read before the decision: refreshing the approval below forgets its run.
        owner = approval.run.conversation.owner_id == user.pk
        reason = ""
        if not self.approved:
            serializer = DecisionInputSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            reason = serializer.validated_data["reason"]
        with blame_configuration():
            decision = decide_approval(
                approval=approval, user=user, approved=self.approved, reason=reason
            )
        approval.refresh_from_db()
        body: dict[str, Any] = {"approval": ApprovalSerializer(approval).data}
        if owner:
            # A reviewer decides one call; the rest of the owner's run is not theirs to read.
            run = selectors.run_with_calls(run_id=decision.run.pk)
            body["run"] = RunSerializer(run).data
        queued = decision.resumed and uses_workers()
        return Response(body, status=status.HTTP_202_ACCEPTED if queued else status.HTTP_200_OK)


_DECIDE_RESPONSES = {
    200: DecisionResultSerializer,
    202: OpenApiResponse(
        DecisionResultSerializer,
        description="The last decision of the turn: a worker resumes the run (celery executor).",
    ),
    401: ERR_401,
    403: _error(
        "The call is yours but staff-level (`approval_forbidden`), or the request is refused "
        "(`permission_denied`, e.g. a missing CSRF token with a session)."
    ),
    404: _error("No such tool call among those you may decide (`not_found`)."),
    409: _error(
        "Already decided (`already_decided`), or the call needs no approval (`no_approval`)."
    ),
    503: _error("The resumed run cannot reach its provider as configured (`configuration_error`)."),
}


class ToolCallApproveView(_DecideView):
    """Approve one held tool call."""

    approved = True

    @document(
        operation_id="tool_calls_approve",
        summary="Approve a tool call",
        description=(
            "`id` is the call's `pk`. When this was the last pending approval of the turn, "
            "the run resumes: the inline executor runs it in this request (200, the run "
            "as it ended or waits again), the celery executor on a worker (202)."
        ),
        request=None,
        responses=_DECIDE_RESPONSES,
        tags=["approvals"],
    )
    def post(self, request: Request, tool_call_id: int) -> Response:
        return super().post(request, tool_call_id)


class ToolCallRejectView(_DecideView):
    """Reject one held tool call (with an optional reason the model reads)."""

    approved = False

    @document(
        operation_id="tool_calls_reject",
        summary="Reject a tool call",
        description=(
            "`id` is the call's `pk`. The model is told "
            '`Error: tool "NAME" was rejected by a reviewer` followed by `: REASON` when a '
            "reason is given. Resumes the run like an approval."
        ),
        request=DecisionInputSerializer,
        responses={**_DECIDE_RESPONSES, 400: _error("The reason is not valid (`invalid`).")},
        tags=["approvals"],
    )
    def post(self, request: Request, tool_call_id: int) -> Response:
        return super().post(request, tool_call_id)
