"""The base class of every API view: its policies are set here, not in DRF's globals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.apps import apps
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    TokenAuthentication,
)
from rest_framework.generics import GenericAPIView
from rest_framework.metadata import SimpleMetadata
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import BasePagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.serializers import Serializer
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from conversations import selectors
from conversations.models import Conversation

from .compact import CompactJSONRenderer
from .errors import QueryValidationError, exception_handler
from .limits import DepthLimitedJSONParser
from .schema import ConversationsAutoSchema

if TYPE_CHECKING:
    from rest_framework.settings import _Settings as _DRFSettings

__all__ = ["ConversationsAPIView", "DescriptionMetadata"]


class _Settings:
    """DRF's settings, except that ``?format=`` does not pick a renderer."""

    URL_FORMAT_OVERRIDE = None

    def __getattr__(self, name: str) -> Any:
        return getattr(api_settings, name)


class JSONNegotiation(DefaultContentNegotiation):
    """Content negotiation that leaves ``?format=`` to the views (the export uses it)."""

    # Duck-typed: every name but one is DRF's own (the stubs know only DRF's class).
    settings = cast("_DRFSettings", _Settings())


class DescriptionMetadata(SimpleMetadata):
    """``OPTIONS``: the view's name, description and media types (methods in ``Allow``).

    DRF's default also describes the fields of each writable method by calling
    ``get_serializer()``, which needs a ``serializer_class``; the app's views
    pick their serializers per method instead, so the OpenAPI schema is where
    request bodies are described.
    """

    def determine_actions(self, request: Request, view: APIView) -> dict[str, Any]:
        return {}


class ConversationsAPIView(GenericAPIView[Any]):
    """Authentication, permissions, JSON in and out, and the app's error handler.

    Token authentication comes first so that a request without credentials is
    a 401 with ``WWW-Authenticate: Token``; it is offered only when the host
    installs ``rest_framework.authtoken`` (else session only, and 403).
    """

    authentication_classes = (TokenAuthentication, SessionAuthentication)
    permission_classes = (IsAuthenticated,)
    renderer_classes = (CompactJSONRenderer,)
    parser_classes = (DepthLimitedJSONParser,)
    content_negotiation_class = JSONNegotiation
    metadata_class = DescriptionMetadata
    filter_backends = ()
    pagination_class: type[BasePagination] | None = None
    # Set per view so the OpenAPI schema works without the host's DEFAULT_SCHEMA_CLASS.
    schema = ConversationsAutoSchema()

    def get_authenticators(self) -> list[BaseAuthentication]:
        tokens = apps.is_installed("rest_framework.authtoken")
        return [
            auth()
            for auth in self.authentication_classes
            if tokens or not issubclass(auth, TokenAuthentication)
        ]

    def get_exception_handler(self) -> Any:
        return exception_handler

    # Helpers for the views ---------------------------------------------------------

    def owned_conversations(self) -> QuerySet[Conversation]:
        """The requesting user's conversations: the only ones any view may touch."""
        return selectors.owned_conversations(user=self.request.user)

    def get_conversation(self, conversation_id: Any) -> Conversation:
        """The user's conversation, else 404 (never 403: it may not exist at all)."""
        return get_object_or_404(self.owned_conversations(), pk=conversation_id)

    def query(self, serializer_class: type[Serializer[Any]]) -> dict[str, Any]:
        """The validated query parameters (errors located by ``parameter``)."""
        serializer = serializer_class(data=self.request.query_params)
        if not serializer.is_valid():
            raise QueryValidationError(serializer.errors)
        return dict(serializer.validated_data)
