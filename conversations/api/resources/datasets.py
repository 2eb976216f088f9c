"""Datasets: the caller's rated conversations as fine-tuning JSON Lines, streamed."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request

from conversations.services.feedback import (
    DATASET_FORMATS,
    RATINGS,
    DatasetQuery,
    dataset_lines,
)

from ..base import ConversationsAPIView
from ..responses import AUTH_ERRORS, ERR_400_LIST
from ..schema import document

__all__ = ["DatasetExportQuerySerializer", "DatasetExportView"]


class DatasetExportQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of a dataset export."""

    format = serializers.ChoiceField(choices=list(DATASET_FORMATS), default="openai-chat")
    rated = serializers.ChoiceField(
        choices=list(RATINGS),
        required=False,
        help_text="`up`: rated and never down; `down`: rated down at least once; `any`: rated.",
    )
    profile = serializers.SlugField(required=False, help_text="Only this profile's.")
    # ``from`` is a keyword: the field is renamed in get_fields (input and schema).
    from_ = serializers.DateField(required=False, help_text="Created on or after (UTC).")
    to = serializers.DateField(required=False, help_text="Created on or before (UTC).")
    all = serializers.BooleanField(
        default=False, help_text="Everyone's conversations (staff only)."
    )
    evaluations = serializers.BooleanField(
        default=False, help_text="Include evaluation conversations."
    )

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)


def _jsonl(lines: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for line in lines:
        yield json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class DatasetExportView(ConversationsAPIView):
    """Your conversations as a fine-tuning dataset (staff: everyone's with ``all=1``)."""

    @document(
        operation_id="datasets_export",
        summary="Download a dataset (JSON Lines)",
        description=(
            "`openai-chat`: OpenAI's chat fine-tuning lines (`messages`, `tools`; answers "
            "rated down carry `weight: 0`). `openai-dpo`: preference pairs from sibling "
            "branches (the same prefix answered twice, one answer rated up and the other "
            "down). `jsonl`: the app's own shape with the feedback. Redacted conversations "
            "never appear; evaluation conversations only with `evaluations=1`."
        ),
        parameters=[DatasetExportQuerySerializer],
        responses={
            (200, "application/jsonl"): OpenApiResponse(
                OpenApiTypes.STR, description="JSON Lines, one example per line."
            ),
            400: ERR_400_LIST,
            **AUTH_ERRORS,
        },
        tags=["data"],
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        query = self.query(DatasetExportQuerySerializer)
        if query["all"] and not request.user.is_staff:
            raise PermissionDenied("Only staff may export everyone's conversations.")
        to = query.get("to")
        selection = DatasetQuery(
            owner=None if query["all"] else request.user,
            rated=query.get("rated"),
            profile=query.get("profile"),
            date_from=_day_start(query["from"]) if query.get("from") else None,
            date_to=_day_start(to + dt.timedelta(days=1)) if to else None,
            evaluations=query["evaluations"],
        )
        lines = dataset_lines(query=selection, format=query["format"])
        response = StreamingHttpResponse(_jsonl(lines), content_type="application/jsonl")
        stamp = timezone.now().strftime("%Y%m%d")
        name = f"{query['format']}-{stamp}.jsonl"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
