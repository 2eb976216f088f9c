"""What the API says about sub-agents: a run's place in the tree of runs its agent calls started."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.models import Run, RunStatus

from .fields import NamedChoiceField

__all__ = ["ChildRunSerializer", "RunTreeSerializer"]


class ChildRunSerializer(serializers.Serializer[Any]):
    """A run an agent call of another run started."""

    id = serializers.UUIDField()
    conversation = serializers.UUIDField(source="conversation_id")
    profile = serializers.CharField(source="profile.slug", allow_null=True)
    status = NamedChoiceField(choices=RunStatus.choices, component_name="RunStatus")
    error_code = serializers.CharField()
    cost = serializers.DecimalField(max_digits=18, decimal_places=9, allow_null=True)


class RunTreeSerializer(serializers.Serializer[Any]):
    """A run's links to the runs of its agent calls, and the cost of all of them."""

    parent_run = serializers.UUIDField(
        source="parent_run_id",
        allow_null=True,
        help_text="The run whose agent call started this one; null for a run of its own.",
    )
    root_run = serializers.UUIDField(
        source="root_run_id",
        allow_null=True,
        help_text="The first run of the chain of agent calls; null for a run of its own.",
    )
    total_cost = serializers.SerializerMethodField(
        help_text="`cost` plus the cost of every run its agent calls started, at any depth "
        "(null while none had a known price)."
    )
    children = serializers.SerializerMethodField(
        help_text="The runs this run's agent calls started, oldest first."
    )

    @extend_schema_field(serializers.DecimalField(max_digits=18, decimal_places=9, allow_null=True))
    def get_total_cost(self, obj: Run) -> str | None:
        # ``descendants_cost`` is annotated (see selectors.runs_with_calls).
        below = getattr(obj, "descendants_cost", None)
        if obj.cost is None and below is None:
            return None
        total = (obj.cost or Decimal(0)) + (below or Decimal(0))
        return f"{total:.9f}"

    @extend_schema_field(ChildRunSerializer(many=True))
    def get_children(self, obj: Run) -> list[dict[str, Any]]:
        # ``child_runs`` is prefetched (see selectors.runs_with_calls).
        children = getattr(obj, "child_runs", [])
        return cast(list[dict[str, Any]], ChildRunSerializer(children, many=True).data)
