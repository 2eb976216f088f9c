"""What a client may choose from: the enabled tools and the profiles.

Every query is scoped to ``owner=request.user``; another user's conversation,
message or run is a 404. Errors leave through ``errors.exception_handler``.
"""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors

from ..base import ConversationsAPIView
from ..catalog_serializers import ProfileSerializer, ToolSerializer
from ..responses import (
    AUTH_ERRORS,
)
from ..schema import document


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
