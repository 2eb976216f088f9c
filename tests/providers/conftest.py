"""Fixtures for the provider tests, on the recorder of :mod:`tests.providers.mock_http`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.providers.mock_http import Recorder, Reply


@pytest.fixture
def mock_http() -> Iterator[Callable[..., Recorder]]:
    """``mock_http(*replies)`` -> a lenient :class:`Recorder`; its client is closed afterwards."""
    made: list[Recorder] = []

    def make(*replies: Reply) -> Recorder:
        made.append(Recorder(*replies))
        return made[-1]

    yield make
    for recorder in made:
        recorder.client.close()


@pytest.fixture
def sleeps() -> list[float]:
    """Pass ``sleep=sleeps.append`` so retries record their delay instead of waiting."""
    return []
