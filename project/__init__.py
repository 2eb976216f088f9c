"""The host project used for development, the demo and the tests (not shipped).

Its Celery app is loaded with it when Celery is installed.
"""

import importlib.util

if importlib.util.find_spec("celery") is not None:
    # Loaded with Django so that tasks published by the web process use this app.
    from .celery import app as celery_app
else:  # pragma: no cover - the app works without Celery (EXECUTOR "inline")
    celery_app = None

__all__ = ["celery_app"]
