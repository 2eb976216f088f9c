"""Tests of the Celery tasks, with real worker processes where it matters."""
