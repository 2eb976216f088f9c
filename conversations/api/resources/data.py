"""The user's own data: every conversation as a JSON Lines download."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework.request import Request

from conversations.selectors.export import conversation_lines

from ..base import ConversationsAPIView
from ..responses import AUTH_ERRORS
from ..schema import document

__all__ = ["ExportAllView"]


class ExportAllView(ConversationsAPIView):
    """All of the user's conversations, one JSON object per line."""

    @document(
        operation_id="export_all",
        summary="Download all your conversations (JSON Lines)",
        description=(
            "One conversation per line, oldest first, streamed: `title`, `profile`, "
            "`metadata` and `messages` in the import format (each line can be posted to "
            "`/conversations/import/` as it is: each message an `ImportMessage`, an "
            "assistant turn with the `provider_tool_calls` and `citations` the message list "
            "shows), plus ids, times, where a branch forked, each call's status and the runs "
            "with their usage. A turn still running is left out of its line (`complete` is "
            "false)."
        ),
        responses={
            (200, "application/jsonl"): OpenApiResponse(
                OpenApiTypes.STR, description="JSON Lines, one conversation per line."
            ),
            **AUTH_ERRORS,
        },
        tags=["data"],
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        response = StreamingHttpResponse(
            conversation_lines(user=request.user), content_type="application/jsonl"
        )
        stamp = timezone.now().strftime("%Y%m%d")
        response["Content-Disposition"] = f'attachment; filename="conversations-{stamp}.jsonl"'
        return response
