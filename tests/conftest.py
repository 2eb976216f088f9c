"""Shared fixtures; tests marked ``postgres`` are skipped on SQLite."""

import pytest
from django.db import connection


def pytest_collection_modifyitems(config, items):
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL: run with DATABASE_URL=postgres://...")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)
