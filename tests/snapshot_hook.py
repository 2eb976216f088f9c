"""A cache for tests that runs a hook where the loop forgets a run's in-flight snapshot.

The loop forgets an answer's snapshot just before it stores the answer's
turn; a hook there lets a test act at that exact moment (open a stream, ask
for a cancellation) without waiting on time. Use the ``snapshot_hook``
fixture (``tests/conftest.py``), which makes this the default cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.core.cache.backends.locmem import LocMemCache

__all__ = ["LOCATION", "SnapshotHookCache", "when_snapshot_forgotten"]

LOCATION = "snapshot-hook"

_lock = threading.Lock()
_hooks: dict[str, Callable[[], None]] = {}
"""Run id -> what to do the first time its snapshot is forgotten (each thread has its own
cache object, so the hooks live here)."""

_MARK = "inflight:"


class SnapshotHookCache(LocMemCache):
    """Local memory; forgetting a run's snapshot first runs the hook set for that run, once."""

    def delete(self, key: str, version: int | None = None) -> bool:
        run_id = key.partition(_MARK)[2] if _MARK in key else ""
        with _lock:
            hook = _hooks.pop(run_id, None) if run_id else None
        if hook is not None:
            hook()
        return super().delete(key, version)


def when_snapshot_forgotten(run_id: Any, hook: Callable[[], None]) -> None:
    """Run ``hook`` (in the loop's thread) the first time run ``run_id``'s snapshot is forgotten."""
    with _lock:
        _hooks[str(run_id)] = hook


def clear_hooks() -> None:
    with _lock:
        _hooks.clear()
