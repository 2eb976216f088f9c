"""Listing MCP servers' tools into ``MCPTool`` rows, disabling any whose schema changed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from conversations.exceptions import MCPServerError
from conversations.models import MCPServer, MCPTool

__all__ = ["SyncReport", "schema_hash", "sync_server_tools"]


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What one sync of one server changed."""

    server: str
    """The server's slug."""
    added: tuple[str, ...] = ()
    """Tools listed for the first time."""
    changed: tuple[str, ...] = ()
    """Tools whose description or input schema changed (now disabled)."""
    removed: tuple[str, ...] = ()
    """Tools no longer listed."""
    unchanged: int = 0
    """How many tools are as before."""


def schema_hash(*, description: str, input_schema: Mapping[str, Any]) -> str:
    """SHA-256 of what the model is shown of a tool, independent of key order."""
    canonical = json.dumps(
        {"description": description, "input_schema": input_schema},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def sync_server_tools(*, server: MCPServer) -> SyncReport:
    """List ``server``'s tools and store them; raise :class:`MCPServerError` when it fails.

    A new tool is enabled only on a trusted server. A tool whose hash changed
    is disabled (on every server) and keeps what admins last saw for
    comparison. The connection is made before any transaction opens; the
    failure text is kept on the server row for the admin.
    """
    from .client import connection_of, list_remote_tools

    try:
        remote = list_remote_tools(connection_of(server))
    except MCPServerError as exc:
        MCPServer.objects.filter(pk=server.pk).update(last_sync_error=exc.detail)
        raise
    now = timezone.now()
    added: list[str] = []
    changed: list[str] = []
    unchanged = 0
    with transaction.atomic():
        existing = {t.name: t for t in MCPTool.objects.select_for_update().filter(server=server)}
        for item in remote:
            digest = schema_hash(description=item.description, input_schema=item.input_schema)
            row = existing.pop(item.name, None)
            if row is None:
                MCPTool.objects.create(
                    server=server,
                    name=item.name,
                    description=item.description,
                    input_schema=dict(item.input_schema),
                    annotations=dict(item.annotations),
                    schema_hash=digest,
                    enabled=server.trusted,
                    synced_at=now,
                )
                added.append(item.name)
                continue
            if row.schema_hash != digest:
                row.previous_description = row.description
                row.previous_input_schema = row.input_schema
                row.schema_changed_at = now
                row.enabled = False
                changed.append(item.name)
            else:
                unchanged += 1
            row.description = item.description
            row.input_schema = dict(item.input_schema)
            row.annotations = dict(item.annotations)
            row.schema_hash = digest
            row.present = True
            row.synced_at = now
            row.save()
        removed = sorted(existing)
        MCPTool.objects.filter(server=server, name__in=removed).update(present=False)
        MCPServer.objects.filter(pk=server.pk).update(last_synced_at=now, last_sync_error="")
    return SyncReport(
        server=server.slug,
        added=tuple(added),
        changed=tuple(changed),
        removed=tuple(removed),
        unchanged=unchanged,
    )
