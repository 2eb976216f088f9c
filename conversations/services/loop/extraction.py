"""``extract()``: one call from text to validated JSON, stored as a conversation and its run."""

from __future__ import annotations

from typing import Any

from conversations.exceptions import ExtractionFailed
from conversations.models import Profile, Run

from ..transcript.messages import create_conversation
from .output import SchemaArgument, output_schema_for
from .tool_loop import run_tool_loop

__all__ = ["extract"]

_TITLE_LENGTH = 80


def extract(*, profile: Profile, content: str, schema: SchemaArgument, owner: Any) -> Any:
    """Ask ``profile``'s model about ``content`` and return its answer as JSON satisfying ``schema``.

    ``schema``: a JSON Schema, a stored :class:`~conversations.models.OutputSchema`
    or its sha256. A new conversation of ``owner`` holds the exchange and its
    run (``Run.output`` is the value returned), like every other call. The
    run executes here whatever the executor, since the value is the answer.
    Raises :class:`InvalidArgumentError` (``invalid_schema``) for an unusable
    schema before anything is stored, and :class:`ExtractionFailed` (its
    ``code`` the run's error code, e.g. ``output_invalid``) when the run ends
    without a valid output.
    """
    owner_id = getattr(owner, "pk", None)
    stored = output_schema_for(schema=schema, profile=None, owner_id=owner_id)
    conversation = create_conversation(
        owner=owner, title=content.strip()[:_TITLE_LENGTH], profile=profile
    )
    run = run_tool_loop(
        conversation=conversation, content=content, profile=profile, output_schema=stored
    )
    if run.status != Run.Status.COMPLETED:
        raise ExtractionFailed(
            f"the run ended {run.status}: {run.error_message or run.error_code}",
            code=run.error_code or run.status,
            run=run,
        )
    return run.output
