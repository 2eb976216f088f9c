"""Conversation endpoints: list and create, read, rename, delete, import and export one.

Every query is scoped to ``owner=request.user``; another user's conversation,
message or run is a 404. Errors leave through ``errors.exception_handler``.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors
from conversations.models import Conversation
from conversations.services import create_conversation
from conversations.services import history as operations

from ..base import ConversationsAPIView
from ..errors import APIError, blame_configuration, error_item
from ..limits import check_import_values
from ..pagination import ConversationPagination
from ..responses import (
    AUTH_ERRORS,
    ERR_400,
    ERR_400_LIST,
    ERR_404,
    ERR_409,
)
from ..responses import error_response as _error
from ..schema import CREATED_LOCATION, document
from ..serializers import (
    ConversationInputSerializer,
    ConversationListQuerySerializer,
    ConversationSerializer,
    ImportInputSerializer,
)


class ConversationQueries(ConversationsAPIView):
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


class ConversationListView(ConversationQueries):
    """The user's conversations."""

    pagination_class = ConversationPagination

    @document(
        operation_id="conversations_list",
        summary="List your conversations",
        description="Most recently updated first; cursor pagination; `q` searches titles; "
        "branches are listed only with `branches=all`; an evaluation's conversations never.",
        parameters=[ConversationListQuerySerializer],
        responses={200: ConversationSerializer(many=True), 400: ERR_400_LIST, **AUTH_ERRORS},
        tags=["conversations"],
    )
    def get(self, request: Request) -> Response:
        query = self.query(ConversationListQuerySerializer)
        # An evaluation's replays are reached by id (and in the admin), never listed,
        # nor is a sub-agent's conversation: it is reached from the call it answers.
        conversations = self.annotated().filter(
            kind=Conversation.Kind.CHAT, parent_tool_call__isnull=True
        )
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


class ConversationDetailView(ConversationQueries):
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


class ConversationImportView(ConversationQueries):
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


CONTEXT_FIRST_POSITION = "Context-First-Position"
"""Export header: the first stored position the body sends (0: the whole history)."""
CONTEXT_SUMMARY = "Context-Summary"
"""Export header: the positions the summary in the body covers (``0-41``), or ``pending 0-41``
when the next call would first write that summary (the body has none)."""


class ConversationExportView(ConversationsAPIView):
    """The request body a provider would be sent for this history (a dry run)."""

    @document(
        operation_id="conversations_export",
        summary="Export the history as a provider's request body",
        description=(
            "Exactly the JSON body the chosen adapter would send for the next turn (the "
            "profile's system prompt, the view of the history the next call sends, the tools "
            "and options it offers). Nothing is sent. `openai` is the Chat Completions body. "
            "The `Context-First-Position` header says where the view begins (0: the whole "
            "history); `Context-Summary` the positions of the summary sent in place of the "
            "older turns (`pending 0-N`: the next call would write it first)."
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
            exported = operations.export_view(conversation=conversation, format=fmt)
        response = Response(exported.payload)
        # The body stays exactly the adapter's; where its view begins travels beside it.
        if exported.first_position is not None:
            response[CONTEXT_FIRST_POSITION] = str(exported.first_position)
        if exported.summary is not None:
            response[CONTEXT_SUMMARY] = (
                f"{exported.summary.first_position}-{exported.summary.last_position}"
            )
        elif exported.summarize_through is not None:
            response[CONTEXT_SUMMARY] = f"pending 0-{exported.summarize_through}"
        return response


# Configuration ------------------------------------------------------------------------------------
