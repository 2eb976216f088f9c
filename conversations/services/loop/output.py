"""Structured output in a run: which schema it answers in, checking the answer, the repair turn.

A run has at most one output schema (the request's, else its profile's),
stored once per distinct schema as an :class:`OutputSchema`. Every request
of the run carries it (each adapter asks its vendor's native way); the
final answer, the one without tool calls, is parsed and validated here. An
answer that fails gets exactly one repair turn: a user message, stored like
every message, naming the JSON pointer and the error, asked with no tool
offered so that every vendor enforces the schema on it. A second failure
ends the run ``failed`` with code ``output_invalid``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from conversations.conf import app_settings
from conversations.domain import ChatMessage
from conversations.domain.output import OutputCheck, OutputSpec, check_schema
from conversations.exceptions import InvalidArgumentError
from conversations.models import OutputSchema, Profile, Run

from ..transcript.messages import append_after
from .fencing import hold_run
from .rounds import RequestSetup, TurnState

__all__ = [
    "OUTPUT_INVALID",
    "SchemaArgument",
    "output_schema_for",
    "output_spec",
    "store_output_schema",
    "store_repair_turn",
    "with_output",
]

OUTPUT_INVALID = "output_invalid"
"""The error code of a run whose final answer failed its schema twice."""

SchemaArgument = OutputSchema | Mapping[str, Any] | str
"""How a caller names an output schema: a stored row, a JSON Schema, or a stored one's sha256."""


def store_output_schema(*, schema: Mapping[str, Any], name: str = "output") -> OutputSchema:
    """The stored row of ``schema`` (checked first), created on first use.

    Raises :class:`InvalidArgumentError` (``invalid_schema``, ``field`` the
    JSON pointer of the problem) for a schema that is not usable; see
    :func:`conversations.domain.output.check_schema`.
    """
    settings = app_settings()
    checked = check_schema(
        schema, max_bytes=settings.MAX_SCHEMA_BYTES, max_depth=settings.MAX_JSON_DEPTH
    )
    spec = OutputSpec(schema=checked, name=name)
    found = OutputSchema.objects.filter(sha256=spec.sha256).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return OutputSchema.objects.create(name=spec.name, schema=checked, sha256=spec.sha256)
    except IntegrityError:
        # Stored meanwhile by another request with the same schema.
        return OutputSchema.objects.get(sha256=spec.sha256)


def output_schema_for(
    *, schema: SchemaArgument | None, profile: Profile | None, owner_id: int | None = None
) -> OutputSchema | None:
    """The schema a new run answers in: the one given, else the profile's (``None``: text).

    A sha256 names a stored schema that ``owner_id``'s runs or a profile used
    (any stored one when ``owner_id`` is ``None``); another user's schema is
    unknown to the caller.
    """
    if schema is None:
        return profile.output_schema if profile is not None else None
    if isinstance(schema, OutputSchema):
        return schema
    if isinstance(schema, str):
        return _by_digest(schema, owner_id)
    return store_output_schema(schema=schema)


def _by_digest(digest: str, owner_id: int | None) -> OutputSchema:
    rows = OutputSchema.objects.filter(sha256=digest.strip().lower())
    if owner_id is not None:
        rows = rows.filter(
            Q(runs__conversation__owner_id=owner_id) | Q(profiles__isnull=False)
        ).distinct()
    found = rows.first()
    if found is None:
        raise InvalidArgumentError(
            "no stored output schema has this sha256", code="invalid_schema", field=""
        )
    return found


def output_spec(run: Run) -> OutputSpec | None:
    """What the run's requests carry: its schema (one query when it has one), else ``None``."""
    if run.output_schema_id is None:
        return None
    row = run.output_schema
    assert row is not None  # set with its id
    return OutputSpec(schema=row.schema, name=row.name, sha256=row.sha256)


def with_output(request: RequestSetup, spec: OutputSpec | None) -> RequestSetup:
    """``request`` whose options ask for ``spec`` (unchanged without one)."""
    if spec is None:
        return request
    options = dataclasses.replace(request.options, output_schema=spec)
    return dataclasses.replace(request, options=options)


def repair_text(check: OutputCheck) -> str:
    """The repair turn's words: where the answer failed and why, and what to send instead."""
    return (
        f"Your answer does not satisfy the required JSON Schema {check.describe()}. "
        "Answer again with only the corrected JSON value, nothing else."
    )


def store_repair_turn(*, run: Run, state: TurnState, check: OutputCheck) -> None:
    """Store the repair user message (fenced: only while this process holds the run)."""
    message = ChatMessage.user(repair_text(check))
    with transaction.atomic():
        hold_run(run)
        append_after(conversation=run.conversation, messages=[message], tail=state.tail, run=run)
    state.history.append(message)
