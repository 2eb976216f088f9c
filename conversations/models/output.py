"""Output schemas: the JSON Schemas runs' final answers were asked to satisfy, stored once each."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q

from .constraints import DeepJSONDecoder, is_json

__all__ = ["OutputSchema"]


class OutputSchema(models.Model):
    """A JSON Schema for structured output, identified by the sha256 of its canonical JSON.

    The same schema sent twice (by anyone, keys in any order) is one row, so
    a run's output can be listed by schema. Rows are never edited: a changed
    schema is another digest.
    """

    name = models.CharField(max_length=64, default="output", help_text="A short name.")
    schema = models.JSONField(decoder=DeepJSONDecoder)
    sha256 = models.CharField(
        max_length=64, unique=True, help_text="sha256 of the schema's canonical JSON."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "output schema"
        constraints = [
            models.CheckConstraint(
                condition=is_json("schema", "object"), name="conversations_outputschema_object"
            ),
            models.CheckConstraint(
                condition=Q(sha256__regex=r"^[0-9a-f]{64}$"),
                name="conversations_outputschema_sha256_hex",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.sha256[:12]})"


def output_column(value: Any) -> Any:
    """What to write to ``Run.output`` for ``value``: JSON null stays JSON, never SQL NULL
    (which means "no output" to the rule a completed run with a schema is held to)."""
    return models.Value(None, models.JSONField()) if value is None else value
