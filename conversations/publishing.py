"""Publishing Celery tasks by name, so that no writer has to import the task module.

The executor hands a run to a worker through :func:`publish_run`; the task
itself is registered under :data:`EXECUTE_RUN_TASK` by ``conversations.tasks``
in the worker. Celery is imported only when something is published.
"""

from __future__ import annotations

from typing import Final

from conversations.exceptions import ConfigurationError

__all__ = ["EXECUTE_RUN_TASK", "RECOVER_RUNS_TASK", "publish_run"]

EXECUTE_RUN_TASK: Final = "conversations.execute_run"
"""The name the run-executing task is registered and published under."""
RECOVER_RUNS_TASK: Final = "conversations.recover_runs"
"""The name of the periodic recovery task (for beat schedules)."""


def publish_run(*, run_id: str) -> None:
    """Send the run ``run_id`` to the workers through the current Celery app's broker.

    Raises :class:`ConfigurationError` when Celery is not installed, and
    whatever the broker raises when it refuses the message.
    """
    try:
        from celery import current_app
    except ImportError:
        raise ConfigurationError(
            "CONVERSATIONS['EXECUTOR'] is 'celery' but Celery is missing"
        ) from None
    current_app.send_task(EXECUTE_RUN_TASK, args=[run_id])
