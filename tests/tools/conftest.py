"""Fixtures for tool tests: a private registry, so tests never touch the app's tools."""

from collections.abc import Iterator

import pytest

from conversations.tools import ToolRegistry


@pytest.fixture
def tools() -> Iterator[ToolRegistry]:
    """An empty registry of the test's own (``@tool(registry=tools)``)."""
    yield ToolRegistry()
