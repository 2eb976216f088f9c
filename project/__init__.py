"""The host project used for development, the demo and the tests (not shipped).

Its Celery app is loaded with it when Celery is installed.
"""

import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from celery import Celery

celery_app: "Celery | None"
if importlib.util.find_spec("celery") is not None:
    # Loaded with Django so that tasks published by the web process use this app.
    from .celery import app as _app

    celery_app = _app
else:  # pragma: no cover - the app works without Celery (EXECUTOR "inline")
    celery_app = None

__all__ = ["celery_app"]
