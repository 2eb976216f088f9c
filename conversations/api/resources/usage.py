"""``GET /usage/``: token and cost totals of the user's model calls, grouped by day, model or profile.

Everyone sees their own usage. A user with the permission
``conversations.view_all_usage`` may ask for another user's (``user=<id>``)
or everyone's (``user=all``).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.validators import MaxValueValidator
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from conversations.conf import app_settings
from conversations.selectors.usage import usage_calls, usage_totals

from ..base import ConversationsAPIView
from ..errors import QueryValidationError
from ..schema import document
from ..serializers import ErrorSerializer

__all__ = ["UsageView"]

DEFAULT_DAYS = 30
"""Without ``from``, totals cover this many days up to ``to``."""

VIEW_ALL_USAGE = "conversations.view_all_usage"

LAST_DAY = date.max - timedelta(days=1)
"""The last day a report may cover: its end is the next midnight, which must exist."""

_USER_ID = re.compile(r"[0-9]{1,18}")
"""ASCII digits only: ``isdigit()`` and ``int()`` also take other scripts' digits."""


class UsageQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the usage totals."""

    group_by = serializers.ChoiceField(choices=["day", "model", "profile"], default="day")
    # ``from`` is a keyword: the field is renamed in get_fields (input and schema).
    from_ = serializers.DateField(
        required=False,
        validators=[MaxValueValidator(LAST_DAY)],
        help_text=f"First day (UTC), inclusive; default {DEFAULT_DAYS} days back.",
    )
    to = serializers.DateField(
        required=False,
        validators=[MaxValueValidator(LAST_DAY)],
        help_text="Last day (UTC), inclusive; default today.",
    )
    user = serializers.CharField(
        required=False,
        help_text="Another user's id, or `all` (needs the permission "
        "`conversations.view_all_usage`); default yourself.",
    )

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields

    def validate_user(self, value: str) -> str:
        if value != "all" and not _USER_ID.fullmatch(value):
            raise serializers.ValidationError("Must be a user's id (ASCII digits) or `all`.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("from"), attrs.get("to")
        if start is not None and end is not None and start > end:
            raise serializers.ValidationError({"from": "Must not be after `to`."})
        return attrs


class UsageRowSerializer(serializers.Serializer[Any]):
    """The totals of one group (or of everything: ``key`` is null)."""

    key = serializers.CharField(
        allow_null=True, help_text="The day (YYYY-MM-DD), model or profile slug."
    )
    calls = serializers.IntegerField()
    failed_calls = serializers.IntegerField()
    unpriced_calls = serializers.IntegerField(help_text="Calls without a known price.")
    estimated_calls = serializers.IntegerField(
        help_text="Calls whose tokens are an estimate from the text (the provider reported none: "
        "the answer was stopped, cut at a deadline or broke off); they are in the totals."
    )
    prompt_tokens = serializers.IntegerField()
    cached_prompt_tokens = serializers.IntegerField()
    cache_hit_rate = serializers.FloatField(
        allow_null=True,
        help_text="cached_prompt_tokens / prompt_tokens (null without input tokens): how much "
        "of the input the provider's prompt cache served.",
    )
    completion_tokens = serializers.IntegerField()
    reasoning_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cost = serializers.DecimalField(
        max_digits=24,
        decimal_places=9,
        allow_null=True,
        help_text="Of the priced calls; null when none was priced.",
    )


class UsageReportSerializer(serializers.Serializer[Any]):
    """Usage totals between two days."""

    group_by = serializers.CharField()
    start = serializers.DateField()  # published as ``from`` (see get_fields)
    to = serializers.DateField()
    user = serializers.CharField(help_text="The user's id, or `all`.")
    currency = serializers.CharField()
    total = UsageRowSerializer()
    groups = UsageRowSerializer(many=True)

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = fields.pop("start")
        return fields


class UsageView(ConversationsAPIView):
    """Your model calls' tokens and cost."""

    @document(
        operation_id="usage_retrieve",
        summary="Tokens and cost of your model calls",
        description=(
            "Totals of the model calls made for you between `from` and `to` (UTC days, "
            "inclusive), grouped by `day`, `model` or `profile`. Costs are in `currency`; "
            "calls whose price is unknown are counted in `unpriced_calls`, never as 0. With "
            "the permission `conversations.view_all_usage`, `user` may name another user's "
            "id or `all`."
        ),
        parameters=[UsageQuerySerializer],
        responses={
            200: UsageReportSerializer,
            400: ErrorSerializer,
            403: ErrorSerializer,
            401: ErrorSerializer,
        },
        tags=["usage"],
    )
    def get(self, request: Request) -> Response:
        query = self.query(UsageQuerySerializer)
        end = query.get("to") or datetime.now(UTC).date()
        # Near the calendar's first day the default window starts on that day.
        back = min(DEFAULT_DAYS - 1, (end - date.min).days)
        start = query.get("from") or end - timedelta(days=back)
        if start > end:
            raise QueryValidationError({"from": ["Must not be after `to`."]})
        asked = query.get("user")
        subject: Any = request.user
        label = str(request.user.pk)
        if asked is not None and asked != label:
            if not request.user.has_perm(VIEW_ALL_USAGE):
                raise PermissionDenied("Only users allowed to view all usage may ask for others.")
            subject, label = self._subject(asked)
        calls = usage_calls(user=subject, since=start, until=end)
        total, groups = usage_totals(calls=calls, group_by=query["group_by"])
        report = {
            "group_by": query["group_by"],
            "from": start,
            "to": end,
            "user": label,
            "currency": app_settings().CURRENCY,
            # The serializer reads the rows' attributes (``total_tokens`` included).
            "total": total,
            "groups": groups,
        }
        return Response(UsageReportSerializer(report).data)

    @staticmethod
    def _subject(asked: str) -> tuple[Any, str]:
        if asked == "all":
            return None, "all"
        users = get_user_model().objects.all()
        found = users.filter(pk=asked).first()
        if found is None:
            raise QueryValidationError({"user": [f"No user with id {asked}."]})
        return found, str(found.pk)
