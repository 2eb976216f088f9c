"""A test-only app installed in the Celery workers the tests start (see tests/tasks/conftest.py)."""
