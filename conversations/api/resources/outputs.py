"""Structured outputs: the caller's outputs by schema, the schemas they used, a request's schema.

Every query is scoped to the caller's conversations: another user's schema
digest lists nothing, and is unknown when a message names it.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.core.validators import MaxValueValidator
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors
from conversations.exceptions import InvalidArgumentError
from conversations.models import OutputSchema
from conversations.services.loop.output import output_schema_for

from ..base import ConversationsAPIView
from ..errors import APIError, error_item
from ..pagination import OutputSchemaPagination, RunPagination
from ..responses import AUTH_ERRORS, ERR_400_LIST
from ..schema import document

__all__ = ["OutputListView", "OutputSchemaListView", "requested_schema"]

_LAST_DAY = date.max - timedelta(days=1)


def requested_schema(request: Request, raw: Any) -> OutputSchema | None:
    """The schema a posted message asks for (``None``: the profile's), stored when new.

    Raises the 400 ``invalid_schema`` whose pointer is inside ``/output_schema``.
    """
    if raw is None:
        return None
    if not isinstance(raw, dict | str):
        raise _invalid("Must be a JSON Schema (an object) or the sha256 of one.", "")
    try:
        return output_schema_for(schema=raw, profile=None, owner_id=request.user.pk)
    except InvalidArgumentError as exc:
        raise _invalid(exc.detail, exc.field or "") from None


def _invalid(detail: str, pointer: str) -> APIError:
    return APIError(
        detail,
        code="invalid_schema",
        errors=[error_item("invalid_schema", detail, pointer=f"/output_schema{pointer}")],
    )


class OutputQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the output list."""

    schema = serializers.RegexField(
        r"^[0-9a-f]{64}$", required=False, help_text="sha256 of the output schema."
    )
    # ``from`` is a keyword: the field is renamed in get_fields (input and schema).
    from_ = serializers.DateField(
        required=False,
        validators=[MaxValueValidator(_LAST_DAY)],
        help_text="Runs started on or after this day (UTC).",
    )
    to = serializers.DateField(
        required=False,
        validators=[MaxValueValidator(_LAST_DAY)],
        help_text="Runs started on or before this day (UTC).",
    )

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("from"), attrs.get("to")
        if start is not None and end is not None and start > end:
            raise serializers.ValidationError({"from": "Must not be after `to`."})
        return attrs


class OutputSerializer(serializers.Serializer[Any]):
    """The validated output of one run."""

    run = serializers.UUIDField(source="id")
    conversation = serializers.UUIDField(source="conversation_id")
    schema = serializers.CharField(source="output_schema.sha256")
    schema_name = serializers.CharField(source="output_schema.name")
    output = serializers.JSONField(help_text="The value, valid against the schema.")
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class OutputSchemaSerializer(serializers.Serializer[Any]):
    """A JSON Schema the caller's runs were asked to answer in."""

    sha256 = serializers.CharField()
    name = serializers.CharField()
    schema = serializers.JSONField()
    created_at = serializers.DateTimeField()
    runs = serializers.IntegerField(source="runs_count", help_text="Your runs that used it.")
    last_used_at = serializers.DateTimeField(help_text="When your last run that used it started.")


class OutputListView(ConversationsAPIView):
    """The outputs of the caller's runs, newest first."""

    pagination_class = RunPagination

    @document(
        operation_id="outputs_list",
        summary="List your structured outputs",
        description="The validated outputs of your runs, newest first; `schema` keeps those "
        "of one schema (by sha256), `from`/`to` the runs started on those days (UTC). "
        "Another user's schema lists nothing.",
        parameters=[OutputQuerySerializer],
        responses={200: OutputSerializer(many=True), 400: ERR_400_LIST, **AUTH_ERRORS},
        tags=["outputs"],
    )
    def get(self, request: Request) -> Response:
        query = self.query(OutputQuerySerializer)
        runs = selectors.owned_outputs(
            user=request.user,
            sha256=query.get("schema"),
            start=query.get("from"),
            end=query.get("to"),
        )
        page = self.paginate_queryset(runs)
        return self.get_paginated_response(OutputSerializer(page, many=True).data)


class OutputSchemaListView(ConversationsAPIView):
    """The schemas the caller's runs used."""

    pagination_class = OutputSchemaPagination

    @document(
        operation_id="output_schemas_list",
        summary="List the output schemas you used",
        description="Each schema your runs were asked to answer in, newest first, with how "
        "many of your runs used it.",
        responses={200: OutputSchemaSerializer(many=True), 400: ERR_400_LIST, **AUTH_ERRORS},
        tags=["outputs"],
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(selectors.owned_output_schemas(user=request.user))
        return self.get_paginated_response(OutputSchemaSerializer(page, many=True).data)
